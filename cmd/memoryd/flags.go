package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Every flag has an environment variable MEMORYD_<NAME> (upper case, dashes as
// underscores). Precedence: flag, then environment, then the default. This
// file is the only place memoryd reads its environment.

func envName(flagName string) string {
	return "MEMORYD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flags wraps a FlagSet so that every flag documents its env var and default,
// and takes its initial value from the environment.
type flags struct {
	*flag.FlagSet
	envErrs []error
}

func newFlags(name, usage string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &flags{FlagSet: fs}
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

// Parse parses args and reports the first bad environment variable.
func (f *flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if len(f.envErrs) > 0 {
		return f.envErrs[0]
	}
	return nil
}
