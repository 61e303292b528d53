package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Flags are of two kinds. Settings (connections, limits, formats) have an
// environment variable MEMORYD_<NAME> (upper case, dashes as underscores) and
// a key in the optional configuration file (the flag name, with dashes or
// underscores); precedence: flag, then environment, then the file, then the
// default. Per-invocation arguments (whose memory, which message, --json,
// --reset, ...) come from the command line only, so that a stray MEMORYD_USER
// never changes what a command reads or deletes. This file is the only place
// memoryd reads its environment and configuration file.

func envName(flagName string) string {
	return "MEMORYD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flags wraps a FlagSet so that setting flags take their initial value from
// the environment, and help prints each flag's default once and its
// environment variable when it has one.
type flags struct {
	*flag.FlagSet
	// text is the command's usage text, printed above the flags by -h.
	text    string
	envErrs []error
	secrets map[string]bool
	// args are the per-invocation flags: no environment variable, no
	// configuration file key.
	args map[string]bool
	// fileValues are the values the configuration file set, by flag name.
	fileValues map[string]string
	// source says where each flag's value came from, after Parse.
	source map[string]string
	// configPath is --config, registered once here: client commands call
	// Parse repeatedly to accept flags after positional arguments.
	configPath string
	// envs are the settings whose variable is not MEMORYD_<NAME> (see
	// CommandEnvs), by flag name.
	envs map[string]commandEnv
	// deprecatedEnv are the deprecated variables a setting was read from,
	// for the command to warn about once it has a logger.
	deprecatedEnv []string
	// wants says what each setting's value must be ("a whole number"), for
	// the errors of a bad variable or file key.
	wants map[string]string
}

// commandEnv is a setting's own environment variable and the deprecated
// names still read when it is unset.
type commandEnv struct {
	name       string
	deprecated []string
}

func newFlags(name, usage string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &flags{FlagSet: fs, text: usage, secrets: map[string]bool{}, args: map[string]bool{}, source: map[string]string{}, fileValues: map[string]string{}, envs: map[string]commandEnv{}, wants: map[string]string{}}
	fs.StringVar(&f.configPath, "config", os.Getenv("MEMORYD_CONFIG"),
		`configuration file, YAML with the flags' names as keys (env MEMORYD_CONFIG; default ./memoryd.yaml when present)`)
	// The flag package would print the error and the whole usage on every
	// parse error, to stderr; Parse returns errors that run reports instead:
	// -h prints the usage on stdout, a bad flag one line pointing at -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return f
}

// printUsage writes the usage text and every flag, each with its default
// (once, when not empty) and its environment variable when it has one.
func (f *flags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nFlags:\n", f.text)
	f.VisitAll(func(fl *flag.Flag) {
		typ, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(w, "  --%s", fl.Name)
		if typ != "" {
			fmt.Fprintf(w, " %s", typ)
		}
		var notes []string
		isBool := typ == "" // flag.UnquoteUsage names no type for a bool
		if def := fl.DefValue; def != "" && !(isBool && def == "false") && fl.Name != "config" && !f.secrets[fl.Name] {
			if g, ok := fl.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			notes = append(notes, "default "+def)
		}
		if !f.args[fl.Name] && fl.Name != "config" {
			env := "env " + f.envVar(fl.Name)
			for _, old := range f.envs[fl.Name].deprecated {
				env += ", or " + old + " (deprecated)"
			}
			if f.secrets[fl.Name] {
				env += ", never logged"
			}
			notes = append(notes, env)
		}
		if len(notes) > 0 {
			usage += " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(w, "\n    \t%s\n", strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
	fmt.Fprintf(w, "\nFlags with an env variable may also be set in the configuration file; the others\n"+
		"apply to this invocation only. Exit status: 0 done, 1 failed or unavailable, 2 bad flag,\n"+
		"argument or input (nothing done).\n")
}

// helpRequest is returned by Parse for -h/--help: run prints the usage on
// stdout and exits 0.
type helpRequest struct{ flags *flags }

func (h *helpRequest) Error() string { return "help requested" }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// usageError is a bad flag or argument: run prints it with one line
// pointing at the command's -h and exits 2.
type usageError struct {
	cmd string
	err error
	// input marks a refusal of what the command read (an import file's
	// line), not of its command line: the flags' usage would not help.
	input bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErr returns a usageError of this command. A setting it names as
// --name that came from the environment or the configuration file is
// said to have come from there, so that the operator looks where it is set.
func (f *flags) usageErr(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if src := f.namedSources(err.Error()); src != "" {
		err = fmt.Errorf("%w (%s)", err, src)
	}
	return &usageError{cmd: f.Name(), err: err}
}

// namedSources says where the settings msg names (--name) came from, when
// not from the command line or their default: "workers is set in
// memoryd.yaml".
func (f *flags) namedSources(msg string) string {
	var out []string
	for _, m := range flagRef.FindAllStringSubmatch(msg, -1) {
		src := f.source[m[1]]
		switch {
		case strings.HasPrefix(src, "file "):
			out = append(out, fmt.Sprintf("%s is set in %s", strings.ReplaceAll(m[1], "-", "_"), strings.TrimPrefix(src, "file ")))
		case strings.HasPrefix(src, "env "):
			out = append(out, fmt.Sprintf("set by %s", strings.TrimPrefix(src, "env ")))
		}
	}
	return strings.Join(slices.Compact(out), "; ")
}

// pathArgs are the per-invocation arguments that name files.
var pathArgs = map[string]bool{"file": true, "o": true, "out": true, "users-file": true}

// flagRef matches a flag named in a message: --max-db-size.
var flagRef = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// envVar is the environment variable of the setting called name.
func (f *flags) envVar(name string) string {
	if e, ok := f.envs[name]; ok {
		return e.name
	}
	return envName(name)
}

// lookupEnv returns the value of the setting's variable, or of the first
// deprecated name set, and which variable it was.
func (f *flags) lookupEnv(name string) (env, value string, ok bool) {
	for _, env := range append([]string{f.envVar(name)}, f.envs[name].deprecated...) {
		if v, ok := os.LookupEnv(env); ok {
			return env, v, true
		}
	}
	return "", "", false
}

// fromEnv sets a setting flag's initial value from its environment variable;
// a bad value is reported by Parse.
func (f *flags) fromEnv(name, want string) {
	f.wants[name] = want
	env, v, ok := f.lookupEnv(name)
	if !ok {
		return
	}
	if env != f.envVar(name) {
		f.deprecatedEnv = append(f.deprecatedEnv, fmt.Sprintf("%s is deprecated: set %s (--%s) instead", env, f.envVar(name), name))
	}
	if err := f.Lookup(name).Value.Set(v); err != nil {
		f.envErrs = append(f.envErrs, fmt.Errorf("%s=%q is not %s", env, v, want))
	}
}

// String defines a string setting (environment variable, file key).
func (f *flags) String(dst *string, name, def, usage string) {
	f.StringVar(dst, name, def, usage)
	f.fromEnv(name, "a string")
}

// Secret defines a string setting whose value is never printed or logged.
func (f *flags) Secret(dst *string, name, usage string) {
	f.secrets[name] = true
	f.StringVar(dst, name, "", usage)
	f.fromEnv(name, "a string")
}

// Int defines an integer setting.
func (f *flags) Int(dst *int, name string, def int, usage string) {
	f.IntVar(dst, name, def, usage)
	f.fromEnv(name, "a whole number")
}

// Int64 defines a 64-bit integer setting.
func (f *flags) Int64(dst *int64, name string, def int64, usage string) {
	f.Int64Var(dst, name, def, usage)
	f.fromEnv(name, "a whole number")
}

// Duration defines a duration setting.
func (f *flags) Duration(dst *time.Duration, name string, def time.Duration, usage string) {
	f.DurationVar(dst, name, def, usage)
	f.fromEnv(name, "a duration like 30s")
}

// Float defines a number setting.
func (f *flags) Float(dst *float64, name string, def float64, usage string) {
	f.Float64Var(dst, name, def, usage)
	f.fromEnv(name, "a number")
}

// Bool defines a boolean setting.
func (f *flags) Bool(dst *bool, name string, def bool, usage string) {
	f.BoolVar(dst, name, def, usage)
	f.fromEnv(name, "true or false")
}

// ArgString defines a per-invocation string argument: command line only.
func (f *flags) ArgString(dst *string, name, def, usage string) {
	f.args[name] = true
	f.StringVar(dst, name, def, usage)
}

// ArgInt defines a per-invocation integer argument.
func (f *flags) ArgInt(dst *int, name string, def int, usage string) {
	f.args[name] = true
	f.IntVar(dst, name, def, usage)
}

// ArgDuration defines a per-invocation duration argument.
func (f *flags) ArgDuration(dst *time.Duration, name string, def time.Duration, usage string) {
	f.args[name] = true
	f.DurationVar(dst, name, def, usage)
}

// ArgBool defines a per-invocation boolean argument.
func (f *flags) ArgBool(dst *bool, name string, def bool, usage string) {
	f.args[name] = true
	f.BoolVar(dst, name, def, usage)
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

// Parse parses args, then fills flags that neither args nor the environment
// set from the configuration file (--config, MEMORYD_CONFIG, or ./memoryd.yaml
// when it exists). It reports the first bad environment variable or file key.
func (f *flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{flags: f}
		}
		return &usageError{cmd: f.Name(), err: f.parseError(err)}
	}
	if len(f.envErrs) > 0 {
		return &usageError{cmd: f.Name(), err: f.envErrs[0]}
	}
	var bad error
	f.Visit(func(fl *flag.Flag) {
		// Text that goes into memory or names it; a file name need not
		// be UTF-8.
		if bad != nil || !f.args[fl.Name] || pathArgs[fl.Name] {
			return
		}
		switch v := fl.Value.String(); {
		case !utf8.ValidString(v):
			bad = f.usageErr("--%s is not valid UTF-8", fl.Name)
		case strings.IndexByte(v, 0) >= 0:
			bad = f.usageErr("--%s contains a NUL byte", fl.Name)
		}
	})
	if bad != nil {
		return bad
	}
	explicit := map[string]bool{}
	f.Visit(func(fl *flag.Flag) {
		// A value the file set (a parse before this one: client commands
		// parse again after each argument) is not the command line's.
		if src := f.source[fl.Name]; !strings.HasPrefix(src, "file ") || fl.Value.String() != f.fileValues[fl.Name] {
			explicit[fl.Name] = true
		}
	})
	f.VisitAll(func(fl *flag.Flag) {
		env, _, fromEnv := f.lookupEnv(fl.Name)
		switch {
		case explicit[fl.Name]:
			f.source[fl.Name] = "flag"
		case strings.HasPrefix(f.source[fl.Name], "file "):
			// Set by the file in an earlier parse.
		case fromEnv && !f.args[fl.Name]:
			f.source[fl.Name] = "env " + env
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
		return &usageError{cmd: f.Name(), err: err}
	}
	for key, value := range values {
		name := strings.ReplaceAll(key, "_", "-")
		fl := f.Lookup(name)
		if fl == nil || name == "config" || f.args[name] {
			if (fl == nil || f.args[name]) && !knownFlag(name) {
				// Like a variable's: a per-invocation argument is said to be
				// one, not matched to a setting spelt alike ("file" was
				// answered "did you mean role?"; a review).
				err := fmt.Errorf("%s: unknown key %q (per-invocation arguments, such as --user, are read from the command line only)", configPath, key)
				if f.args[name] {
					err = fmt.Errorf("%s: key %q is --%s, an argument of memoryd %s read from the command line only", configPath, key, name, f.Name())
				} else if near := nearestKey(name); near != "" {
					if strings.Contains(key, "_") {
						near = strings.ReplaceAll(near, "-", "_")
					}
					err = fmt.Errorf("%s: unknown key %q: did you mean %q?", configPath, key, near)
				}
				return &usageError{cmd: f.Name(), err: err}
			}
			continue // a key for another command
		}
		if f.source[name] != "default" {
			continue
		}
		if err := f.Set(name, value); err != nil {
			// A bad value, as a bad flag is: exit status 2.
			if want := f.wants[name]; want != "" {
				return &usageError{cmd: f.Name(), err: fmt.Errorf("%s: %s: %q is not %s", configPath, key, value, want)}
			}
			return &usageError{cmd: f.Name(), err: fmt.Errorf("%s: %s: %w", configPath, key, err)}
		}
		f.source[name] = "file " + configPath
		f.fileValues[name] = f.Lookup(name).Value.String()
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
	spelled := make(map[string]string, len(raw)) // key as a flag name: as written
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		if v == nil {
			// "key:" or "key: ~": not set (fmt.Sprint made it "<nil>").
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("config file %s: %s must be a single value", path, k)
		}
		name := strings.ReplaceAll(k, "_", "-")
		if other, ok := spelled[name]; ok {
			// Which one won depended on map order.
			return nil, fmt.Errorf("config file %s: %s and %s are the same key: keep one", path, other, k)
		}
		spelled[name] = k
		values[k] = fmt.Sprint(v)
	}
	return values, nil
}

// sharedFlags are the flag sets of the options several commands share:
// serve's (connections, workers, extractor, limits) and the client
// commands'.
func sharedFlags() []*flags {
	var (
		so serveOptions
		co clientOptions
	)
	serve, client := newFlags("serve", ""), newFlags("client", "")
	so.register(serve)
	co.register(client)
	return []*flags{serve, client}
}

// knownFlag reports whether name is a setting the configuration file may
// hold: any command's setting (serve's connections, workers, extractor and
// limits; the client commands' --timeout; publish's --ensure-stream). Each
// command reads the keys it has and ignores the others, so one file serves
// every command; per-invocation arguments are never keys.
func knownFlag(name string) bool {
	for _, f := range sharedFlags() {
		if f.Lookup(name) != nil && !f.args[name] {
			return true
		}
	}
	return slices.Contains(commandSettings, name)
}

// commandSettings are the settings that one command registers on its own
// (not through serveOptions or clientOptions): a configuration file
// shared by every command may hold them. TestEverySettingIsAFileKey keeps
// the list complete.
var commandSettings = []string{
	"ensure-stream", // publish
	"role",          // serve
	// proxy and mcp
	"listen", "keys", "key-hashes", "upstream", "upstream-key", "upstream-key-file", "upstream-key-header", "upstream-timeout", "upstream-idle", "enrich-budget",
	"enrich-format", "metrics", "trusted-user-header", "max-request-bytes",
}

// commandEnvs are the variables of the settings two commands share by
// name with different meanings (proxy's and mcp's --listen), each
// command's apart (CommandEnvs), and the deprecated names still read.
var commandEnvs = map[string]map[string]commandEnv{
	// The proxy's own, apart from mcp's; the shared names the docs first
	// promised still work, deprecated.
	"proxy": {
		"listen":     {name: "MEMORYD_PROXY_LISTEN", deprecated: []string{"MEMORYD_LISTEN"}},
		"keys":       {name: "MEMORYD_PROXY_KEYS", deprecated: []string{"MEMORYD_KEYS"}},
		"key-hashes": {name: "MEMORYD_PROXY_KEY_HASHES", deprecated: []string{"MEMORYD_KEY_HASHES"}},
		"metrics":    {name: "MEMORYD_PROXY_METRICS"},
	},
	"mcp": {
		"listen":     {name: "MEMORYD_MCP_LISTEN"},
		"keys":       {name: "MEMORYD_MCP_KEYS"},
		"key-hashes": {name: "MEMORYD_MCP_KEY_HASHES"},
	},
}

// CommandEnvs names the variables of command's settings in commandEnvs
// (MEMORYD_<NAME> otherwise), so that one environment can hold both
// commands'; deprecated names are still read when the new one is unset.
// Call it before defining the flags.
func (f *flags) CommandEnvs(command string) {
	maps.Copy(f.envs, commandEnvs[command])
}

// toolEnvPrefixes are the project's own scripts' and tests' variables
// (scripts/testdb, the Makefile, scripts/riverui-screenshot), which no
// command reads.
var toolEnvPrefixes = []string{"MEMORYD_TEST_", "MEMORYD_SYSTEST_", "MEMORYD_SKIP_", "MEMORYD_SHOT_"}

// serviceLinks are the shapes of the variables Kubernetes sets in each pod
// for every Service of its namespace (a Service memoryd or memoryd-proxy
// gives MEMORYD_SERVICE_HOST, MEMORYD_PROXY_PORT_8081_TCP_ADDR, ...), each
// with the shape of its value: no one set them, and no setting has their
// name. The value is checked too, so that a made-up setting of a like
// name, MEMORYD_METRICS_PORT=9090, is still warned of (a review).
var serviceLinks = []serviceLink{
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_SERVICE_HOST$`), isIP},
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_SERVICE_PORT(_[A-Z0-9_]+)?$`), isPort},
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_PORT_[0-9]+_(TCP|UDP|SCTP)_ADDR$`), isIP},
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_PORT_[0-9]+_(TCP|UDP|SCTP)_PORT$`), isPort},
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_PORT_[0-9]+_(TCP|UDP|SCTP)_PROTO$`), isProto},
	{regexp.MustCompile(`^MEMORYD(_[A-Z0-9_]+)?_PORT(_[0-9]+_(TCP|UDP|SCTP))?$`), func(v string) bool { // tcp://10.0.0.1:8080
		proto, addr, _ := strings.Cut(v, "://")
		host, port, err := net.SplitHostPort(addr)
		return isProto(proto) && err == nil && isIP(host) && isPort(port)
	}},
}

// serviceLink is a service link variable's name and the shape of its value.
type serviceLink struct {
	name  *regexp.Regexp
	value func(string) bool
}

func isIP(v string) bool    { return net.ParseIP(v) != nil }
func isProto(v string) bool { return v == "tcp" || v == "udp" || v == "sctp" }
func isPort(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n > 0 && n < 1<<16
}

// isServiceLink reports whether name=value is one of Kubernetes' service
// link variables: a name of serviceLinks with a value of its shape.
func isServiceLink(name, value string) bool {
	return slices.ContainsFunc(serviceLinks, func(l serviceLink) bool {
		return l.name.MatchString(name) && l.value(value)
	})
}

// knownEnvs is every variable a memoryd command reads.
var knownEnvs = sync.OnceValue(func() map[string]bool {
	known := map[string]bool{"MEMORYD_CONFIG": true}
	for _, f := range sharedFlags() {
		f.VisitAll(func(fl *flag.Flag) {
			if !f.args[fl.Name] {
				known[f.envVar(fl.Name)] = true
			}
		})
	}
	for _, name := range commandSettings {
		known[envName(name)] = true
	}
	for _, envs := range commandEnvs {
		for _, e := range envs {
			known[e.name] = true
			for _, d := range e.deprecated {
				known[d] = true
			}
		}
	}
	return known
})

// strayEnv warns of each MEMORYD_ variable in environ that no command
// reads, naming the known one it is most likely a misspelling of. Without
// it, MEMORYD_DATABSE_URL was ignored and the default database created
// and filled (a newcomer walk), where the configuration file refuses an
// unknown key. Per-invocation arguments have no variable (MEMORYD_USER is
// one of these strays), which the warning says.
func strayEnv(environ []string) []string {
	known := knownEnvs()
	var out []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MEMORYD_") || known[name] || slices.ContainsFunc(toolEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) ||
			isServiceLink(name, value) {
			continue
		}
		msg := fmt.Sprintf("%s is set, but no memoryd setting reads it", name)
		if near := nearest(name, known); near != "" {
			msg += fmt.Sprintf(": did you mean %s?", near)
		} else {
			msg += " (per-invocation arguments, such as --user, are read from the command line only)"
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return out
}

// parseError says an error of the flag package with flags written as the
// docs and -h write them (--user; it wrote -user), and names the nearest
// flag of the command for an unknown one (walk7: "flag provided but not
// defined: -usr"). The package's errors are plain strings.
func (f *flags) parseError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		known := map[string]bool{}
		f.VisitAll(func(fl *flag.Flag) { known[fl.Name] = true })
		if near := nearest(name, known); near != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s?", name, near)
		}
		return fmt.Errorf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("--%s needs a value", name)
	}
	if m := badFlagValueRE.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s for --%s", m[1], m[2])
	}
	return err
}

// badFlagValueRE matches the flag package's `invalid value "x" for flag
// -limit: ...` and `invalid boolean value "x" for -reset: ...`, the value
// quoted by %q.
var badFlagValueRE = regexp.MustCompile(`^(invalid (?:boolean )?value "(?:[^"\\]|\\.)*") for (?:flag )?-(.*)$`)

// nearestKey is the configuration file key (a setting's flag name) within
// two edits of name, or "" (see nearest): a misspelt key is named with its
// likely meaning, as a misspelt variable is.
func nearestKey(name string) string {
	keys := map[string]bool{}
	for _, f := range sharedFlags() {
		f.VisitAll(func(fl *flag.Flag) {
			if !f.args[fl.Name] && fl.Name != "config" {
				keys[fl.Name] = true
			}
		})
	}
	for _, k := range commandSettings {
		keys[k] = true
	}
	return nearest(name, keys)
}

// nearest is the known name within two edits of name (the nearest, then
// the first in order), or "". A short name (under 6 bytes after MEMORYD_)
// takes one edit at most: two turn most short words into another ("file"
// into "role").
func nearest(name string, known map[string]bool) string {
	best, bestD := "", 3
	if len(strings.TrimPrefix(name, "MEMORYD_")) < 6 {
		bestD = 2
	}
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the edit distance of a and b (optimal string
// alignment: a swap of two adjacent bytes is one edit, the commonest typo,
// which a short name's one edit must still match: "ROEL" is "ROLE"), bytes
// counted (variable names are ASCII).
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
