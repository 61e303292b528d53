package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Every flag has an environment variable MEMORYD_<NAME> (upper case, dashes as
// underscores) and a key in the optional configuration file (the flag name,
// with dashes or underscores). Precedence: flag, then environment, then the
// file, then the default. This file is the only place memoryd reads its
// environment and configuration file.

func envName(flagName string) string {
	return "MEMORYD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flags wraps a FlagSet so that every flag documents its env var and default,
// and takes its initial value from the environment.
type flags struct {
	*flag.FlagSet
	envErrs []error
	secrets map[string]bool
	// source says where each flag's value came from, after Parse.
	source map[string]string
	// configPath is --config, registered once here: client commands call
	// Parse repeatedly to accept flags after positional arguments.
	configPath string
}

func newFlags(name, usage string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &flags{FlagSet: fs, secrets: map[string]bool{}, source: map[string]string{}}
	fs.StringVar(&f.configPath, "config", os.Getenv("MEMORYD_CONFIG"),
		`configuration file, YAML with the flags' names as keys (env MEMORYD_CONFIG, default "memoryd.yaml" when present)`)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "%s\n\nFlags (each also read from its environment variable):\n", usage)
		fs.PrintDefaults()
	}
	return f
}

func (f *flags) help(name, usage, def string) string {
	return fmt.Sprintf("%s (env %s, default %q)", usage, envName(name), def)
}

func (f *flags) String(dst *string, name, def, usage string) {
	shown := def
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	f.StringVar(dst, name, def, f.help(name, usage, shown))
}

func (f *flags) Secret(dst *string, name, usage string) {
	f.secrets[name] = true
	def := os.Getenv(envName(name))
	f.StringVar(dst, name, def, fmt.Sprintf("%s (env %s; never logged)", usage, envName(name)))
}

func (f *flags) Int(dst *int, name string, def int, usage string) {
	shown := strconv.Itoa(def)
	if v, ok := os.LookupEnv(envName(name)); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q is not a whole number", envName(name), v))
		} else {
			def = n
		}
	}
	f.IntVar(dst, name, def, f.help(name, usage, shown))
}

func (f *flags) Duration(dst *time.Duration, name string, def time.Duration, usage string) {
	shown := def.String()
	if v, ok := os.LookupEnv(envName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q is not a duration like 30s", envName(name), v))
		} else {
			def = d
		}
	}
	f.DurationVar(dst, name, def, f.help(name, usage, shown))
}

func (f *flags) Float(dst *float64, name string, def float64, usage string) {
	shown := strconv.FormatFloat(def, 'g', -1, 64)
	if v, ok := os.LookupEnv(envName(name)); ok {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q is not a number", envName(name), v))
		} else {
			def = x
		}
	}
	f.Float64Var(dst, name, def, f.help(name, usage, shown))
}

// parseSize parses a byte size such as 500M or 10G (K, M, G, T: powers of
// 1024; a plain number is bytes; an optional trailing B or iB is allowed). The
// empty string is 0, no limit.
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "" {
		return 0, nil
	}
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			t = t[:n-1]
		}
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || x < 0 || x*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q is not like 500M or 10G", s)
	}
	return int64(x * float64(mult)), nil
}

func (f *flags) Bool(dst *bool, name string, def bool, usage string) {
	shown := strconv.FormatBool(def)
	if v, ok := os.LookupEnv(envName(name)); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q is not true or false", envName(name), v))
		} else {
			def = b
		}
	}
	f.BoolVar(dst, name, def, f.help(name, usage, shown))
}

// Parse parses args, then fills flags that neither args nor the environment
// set from the configuration file (--config, MEMORYD_CONFIG, or ./memoryd.yaml
// when it exists). It reports the first bad environment variable or file key.
func (f *flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if len(f.envErrs) > 0 {
		return f.envErrs[0]
	}
	explicit := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	f.VisitAll(func(fl *flag.Flag) {
		switch _, env := os.LookupEnv(envName(fl.Name)); {
		case explicit[fl.Name]:
			f.source[fl.Name] = "flag"
		case env:
			f.source[fl.Name] = "env " + envName(fl.Name)
		default:
			f.source[fl.Name] = "default"
		}
	})
	configPath := f.configPath
	optional := configPath == ""
	if optional {
		configPath = "memoryd.yaml"
	}
	values, err := readConfigFile(configPath, optional)
	if err != nil {
		return err
	}
	for key, value := range values {
		name := strings.ReplaceAll(key, "_", "-")
		fl := f.Lookup(name)
		if fl == nil || name == "config" {
			if f.Lookup(name) == nil && !knownFlag(name) {
				return fmt.Errorf("%s: unknown key %q", configPath, key)
			}
			continue // a key for another command
		}
		if f.source[name] != "default" {
			continue
		}
		if err := f.Set(name, value); err != nil {
			return fmt.Errorf("%s: %s: %w", configPath, key, err)
		}
		f.source[name] = "file " + configPath
	}
	return nil
}

// readConfigFile reads a flat YAML map. A missing optional file is empty.
func readConfigFile(path string, optional bool) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	values := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v.(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("config file %s: %s must be a single value", path, k)
		}
		values[k] = fmt.Sprint(v)
	}
	return values, nil
}

// knownFlag reports whether name is a setting the configuration file may
// hold: any of serve's flags (connections, workers, extractor, limits). Other
// commands read the keys they share with serve and ignore the rest.
func knownFlag(name string) bool {
	var o serveOptions
	all := newFlags("all", "")
	o.register(all)
	return all.Lookup(name) != nil
}
