package systest

// The executable-docs test: every `memoryd …` command shown in README.md and
// docs/*.md runs, as shown, against a real `memoryd serve`.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// docCommand is one `memoryd …` command found in the docs.
type docCommand struct {
	where  string   // file:line
	text   string   // as written (after joining continuation lines)
	env    []string // NAME=value assignments written before it
	args   []string // after "memoryd" (or "go run ./cmd/memoryd")
	quoted []bool   // per arg: whether it was quoted (user text, never a placeholder)
	expect []string // shown output: each must appear in stdout
}

// docSkip is a command the test cannot run here, with the reason. A rule
// that matches no documented command fails the test, so the list stays
// true.
type docSkip struct {
	reason string
	match  func(c docCommand) bool
}

var docSkips = []docSkip{
	{"needs an OpenAI-compatible model server", func(c docCommand) bool {
		return slices.ContainsFunc(c.env, func(kv string) bool { return strings.HasPrefix(kv, "MEMORYD_LLM_BASE_URL=") }) ||
			slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "--llm-base-url") })
	}},
	{"long-running: the test starts the one `memoryd serve` every other command talks to", func(c docCommand) bool {
		return len(c.args) > 0 && c.args[0] == "serve"
	}},
	{"long-running, and needs an upstream model server: package proxy's tests run it against a fake one", func(c docCommand) bool {
		return len(c.args) > 0 && c.args[0] == "proxy"
	}},
	{"long-running: `memoryd mcp --listen` serves HTTP until stopped (cmd/memoryd TestMCPOverHTTPCommand runs it)", func(c docCommand) bool {
		return len(c.args) > 0 && c.args[0] == "mcp" && slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "--listen") })
	}},
}

// docPhase orders the commands so that each finds what it needs: setup and
// help first, then turns published (and processed before anything reads
// them), then the commands that read or change memory, then the ones that
// rebuild or delete it. Within a phase the docs' order holds (facts set
// before facts get).
func docPhase(c docCommand) int {
	if len(c.args) == 0 {
		return 0
	}
	switch c.args[0] {
	case "help", "-h", "--help", "version", "--version", "config", "schemas", "health":
		return 0
	case "migrate":
		return 1
	case "publish":
		return 2
	case "replay":
		return 4
	case "forget":
		return 5
	}
	return 3
}

// TestDocumentedCommandsRun extracts every `memoryd …` command shown in
// README.md and docs/*.md and runs it with the built binary against a real
// `memoryd serve` on an isolated schema, prefix and stream (passed in the
// environment, MEMORYD_DATABASE_URL and friends, so the commands run exactly
// as written). A new doc line is covered without editing this test.
//
// What counts as a command: a line in a shell code block (```sh, bash,
// shell, console or zsh; a leading "$ " is dropped; "\" continues a line; "# …" is a
// comment) or an inline code span that starts with `memoryd ` or
// `go run ./cmd/memoryd ` (the same thing), optionally after NAME=value
// environment assignments.
//
// Synopsis lines are not run: a line with [optional] parts, <placeholders>,
// alternatives a|b, "..." or an unquoted all-caps placeholder value (--user U,
// --since T) is a synopsis, and so is a command whose last flag lacks its
// value (`memoryd health --url` in running text). For every command, run or
// not, `memoryd <command> -h` must succeed and list each --flag the line
// names.
//
// Shown output: in a code block, lines right after a command that start with
// "# →" are output the command prints; each such line (after the arrow) must
// appear in its stdout. For example
//
//	memoryd facts get --user alice city
//	# → Paris
//
// A command fails on a panic, a non-zero exit (the docs show success), or
// missing shown output. A command shown at several places (the same
// arguments, environment and shown output, in the same phase, with no
// command between that may change what it reads) runs once, and each
// place is checked on that run. Commands that cannot run here are
// listed in docSkips with the reason and logged. Every failure is
// reported, each under its file:line, before the test ends.
func TestDocumentedCommandsRun(t *testing.T) {
	t.Parallel()
	light(t)
	cmds := docCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("found only %d memoryd commands in README.md and docs/*.md: is the extraction broken?", len(cmds))
	}

	e := newRelEnv(t, "")
	serve := e.startServe(e.dbURL, "--enrich-timeout", "5s", "--job-timeout", "1m", "--ack-wait", "30s")
	env := []string{
		"MEMORYD_DATABASE_URL=" + withPoolCap(e.dbURL, 2),
		"MEMORYD_NATS_URL=" + e.natsURL,
		"MEMORYD_PREFIX=" + e.prefix,
		"MEMORYD_STREAM=" + e.stream,
		"MEMORYD_LOG_FORMAT=json",
	}
	// The working directory of every command: a stand-in for a checkout
	// (memoryd's go.mod, so `memoryd schemas` writes its docs/schemas as in
	// the repository), so that nothing lands in the real one.
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod")) // tests run in systest/
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		t.Fatal(err)
	}
	// The sample documents the docs' `memoryd docs put` examples read, at
	// the path they have in a checkout.
	examples, err := filepath.Glob(filepath.Join("..", "docs", "examples", "*"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no docs/examples: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "docs", "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		data, err := os.ReadFile(ex)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "docs", "examples", filepath.Base(ex)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "serve answering stats", time.Minute, func() (bool, string) {
		r := runMemoryd(dir, env, 30*time.Second, "stats", "--user", "probe", "--timeout", "2s")
		return r.code == 0, r.stderr
	}, serve)

	helps := map[string]docHelp{}
	help := func(words []string) docHelp {
		key := strings.Join(words, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		args := append(append([]string{}, words...), "-h")
		if len(words) == 0 {
			args = []string{"help"}
		}
		r := runMemoryd(dir, env, time.Minute, args...)
		h := docHelp{args: args, result: r, flags: map[string]bool{}}
		for _, m := range docFlagLineRE.FindAllStringSubmatch(r.stdout+r.stderr, -1) {
			h.flags[m[1]] = m[2] != "" // takes a value
		}
		helps[key] = h
		return h
	}

	type planned struct {
		c     docCommand
		phase int
	}
	var plan []planned
	used := make([]bool, len(docSkips))
	ran := map[string]int{}
	for _, c := range cmds {
		if i := slices.IndexFunc(docSkips, func(s docSkip) bool { return s.match(c) }); i >= 0 {
			used[i] = true
			t.Logf("%s: skipped `%s`: %s", c.where, c.text, docSkips[i].reason)
			continue
		}
		words, synopsis := c.commandWords()
		h := help(words)
		// The command and every flag the line names must exist.
		t.Run(c.where+"/flags", func(t *testing.T) {
			if h.result.code != 0 || docPanicked(h.result) {
				t.Errorf("%s: `memoryd %s` (help for `%s`) exited %d:\n%s%s", c.where, strings.Join(h.args, " "), c.text, h.result.code, h.result.stdout, h.result.stderr)
				return
			}
			for _, fl := range c.flagsNamed() {
				if _, ok := h.flags[fl]; !ok {
					t.Errorf("%s: `%s` names --%s, which `memoryd %s` does not list", c.where, c.text, fl, strings.Join(h.args, " "))
				}
			}
		})
		if last := c.args[len(c.args)-1]; strings.HasPrefix(last, "-") && !strings.Contains(last, "=") && h.flags[strings.TrimLeft(last, "-")] {
			synopsis = true // `memoryd health --url`: the value is in the prose
		}
		if synopsis {
			t.Logf("%s: synopsis `%s`: checked against `memoryd %s`", c.where, c.text, strings.Join(h.args, " "))
			continue
		}
		plan = append(plan, planned{c, docPhase(c)})
	}
	for i, u := range used {
		if !u {
			t.Errorf("skip rule %q matches no documented command: remove it", docSkips[i].reason)
		}
	}
	slices.SortStableFunc(plan, func(a, b planned) int { return a.phase - b.phase })

	// A command the docs show at several places (`memoryd failed`, `memoryd
	// migrate`, ... 27 of the lines) runs once: each place's
	// checks are made on that run's result. The same command means the
	// same phase, environment, arguments and shown output, and no command
	// that may change what it reads run between (state, counted by each
	// run of such a command): a `facts get` shown again after a `facts
	// set` runs again, and is checked against what it prints then.
	type runKey struct {
		state                    int
		phase, env, args, expect string
	}
	runs := map[runKey]struct {
		where string
		r     result
	}{}
	state := 0
	published := false
	for _, p := range plan {
		c := p.c
		if p.phase > 2 && published {
			// What was published is processed before anything reads it.
			waitFor(t, "the published turns processed", 2*time.Minute, func() (bool, string) {
				st, err := e.store.Stats(e.ctx, "")
				return err == nil && st.TurnsReceived > 0 && st.TurnsPending == 0, fmt.Sprintf("%+v %v", st, err)
			}, serve)
			published = false
		}
		t.Run(c.where, func(t *testing.T) {
			key := runKey{state, fmt.Sprint(p.phase), strings.Join(c.env, "\x00"), strings.Join(c.args, "\x00"), strings.Join(c.expect, "\x00")}
			run, done := runs[key]
			if !done {
				run.where, run.r = c.where, runMemoryd(dir, append(append([]string{}, env...), c.env...), 2*time.Minute, c.args...)
				runs[key] = run
				if !c.leavesState() {
					state++
				}
			}
			r := run.r
			ran[filepath.Base(strings.Split(c.where, ":")[0])]++
			if done {
				t.Logf("%s: `%s`: the command of %s, run once for both", c.where, c.text, run.where)
			}
			t.Logf("%s: `%s` exited %d; stdout:\n%s", c.where, c.text, r.code, docShort(r.stdout))
			switch {
			case docPanicked(r):
				t.Errorf("%s: `%s` panicked:\n%s", c.where, c.text, r.stderr)
			case r.code != 0:
				t.Errorf("%s: `%s` exited %d (the docs show it succeeding):\nstdout:\n%sstderr:\n%s", c.where, c.text, r.code, r.stdout, r.stderr)
			}
			for _, want := range c.expect {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("%s: `%s` does not print %q, which the docs show:\n%s", c.where, c.text, want, r.stdout)
				}
			}
		})
		if c.args[0] == "publish" {
			published = true
		}
	}
	for _, f := range []string{"README.md", "protocol.md"} {
		if ran[f] == 0 {
			t.Errorf("no command of %s was run: is the extraction broken?", f)
		}
	}
	if !serve.alive() {
		t.Errorf("serve exited while the documented commands ran: %v\n%s", serve.err, serve.tail())
	}
}

// leavesState reports whether c changes nothing a later command reads (the
// memory, the streams, the files of the working directory): it prints,
// or, for `migrate`, applies what serve's start applied before any command
// ran. Every other command may, and a command shown again after it runs
// again (TestDocumentedCommandsRun).
func (c docCommand) leavesState() bool {
	switch c.args[0] {
	case "help", "-h", "--help", "version", "--version", "health",
		"failed", "deadletters", "stats", "enrich":
		return true
	case "migrate":
		// --set-prefix records another prefix (review12).
		return !slices.ContainsFunc(c.args, func(a string) bool { return strings.HasPrefix(a, "--set-prefix") })
	case "config":
		return len(c.args) > 1 && c.args[1] == "print"
	case "facts", "memory":
		return len(c.args) > 1 && slices.Contains([]string{"get", "list", "history", "search"}, c.args[1])
	}
	return false
}

// docHelp is what `memoryd <command> -h` printed, and the flags it lists
// (true: the flag takes a value).
type docHelp struct {
	args   []string
	result result
	flags  map[string]bool
}

// docFlagLineRE matches a flag line of Go's flag.PrintDefaults: "  -name"
// for a boolean, "  -name type" for a flag that takes a value.
var docFlagLineRE = regexp.MustCompile(`(?m)^\s+-{1,2}([a-z0-9][a-z0-9-]*)(?:[ =]([a-z]\S*))?\s*$`)

// docPlaceholderRE is an unquoted placeholder value: U, U,V, T, N, QUERY.
var docPlaceholderRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(,[A-Z][A-Z0-9_]*)*$`)

// commandWords returns the leading words naming the (sub)command, for
// `memoryd <words> -h`, and whether the line is a synopsis.
func (c docCommand) commandWords() (words []string, synopsis bool) {
	inWords := true
	for i, a := range c.args {
		if !c.quoted[i] && (strings.ContainsAny(a, "[]<>|") || strings.Contains(a, "...") || strings.Contains(a, "…") || docPlaceholderRE.MatchString(a)) {
			synopsis = true
			inWords = false
		}
		if strings.HasPrefix(a, "-") {
			inWords = false
		}
		// Only the command and a subcommand name: `memory search QUERY`.
		if inWords && len(words) < 2 && (len(words) == 0 || docSubcommands[words[0]]) {
			words = append(words, a)
		} else if len(words) > 0 {
			inWords = false
		}
	}
	return words, synopsis
}

// docSubcommands are the commands whose second word is a subcommand.
var docSubcommands = map[string]bool{"config": true, "facts": true, "memory": true}

// flagsNamed returns the flags the line names (--name, --name=v, [--name ...]).
func (c docCommand) flagsNamed() []string {
	var out []string
	for i, a := range c.args {
		if c.quoted[i] {
			continue
		}
		for _, part := range strings.FieldsFunc(a, func(r rune) bool { return strings.ContainsRune("[]|()", r) }) {
			if !strings.HasPrefix(part, "-") || part == "-" || part == "--" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(part, "-"), "=")
			if name != "" && name != "h" && name != "help" {
				out = append(out, name)
			}
		}
	}
	return out
}

// docShort is the start of a command's output, for the log.
func docShort(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

func docPanicked(r result) bool {
	return strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") && strings.Contains(r.stderr, "[running]")
}

// docShellLangs are the code block languages whose lines are commands.
var docShellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true}

var (
	docFenceRE  = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	docSpanRE   = regexp.MustCompile("`([^`]+)`")
	docOutputRE = regexp.MustCompile(`^\s*#\s*→\s?(.*)$`)
)

// docCommands reads README.md and docs/*.md.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	var all []docCommand
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(f), "../")
		cmds, err := parseDocCommands(name, string(data))
		if err != nil {
			t.Errorf("%v", err)
		}
		all = append(all, cmds...)
	}
	return all
}

// parseDocCommands returns the memoryd commands of one Markdown file.
func parseDocCommands(name, text string) ([]docCommand, error) {
	var (
		out     []docCommand
		inBlock bool
		shell   bool // a shell code block: its lines are commands
		fence   string
		last    = -1 // index in out of the previous command of the block, for "# →" lines
	)
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		lineNo := i + 1
		if m := docFenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case !inBlock:
				inBlock, fence, last = true, m[1], -1
				shell = docShellLangs[strings.ToLower(m[2])]
				continue
			case strings.HasPrefix(strings.TrimSpace(line), fence) && m[2] == "":
				inBlock = false
				continue
			}
		}
		if inBlock && !shell {
			continue // a diagram, JSON, a config file: not commands
		}
		if inBlock {
			if m := docOutputRE.FindStringSubmatch(line); m != nil {
				if last >= 0 && strings.TrimSpace(m[1]) != "" {
					out[last].expect = append(out[last].expect, strings.TrimSpace(m[1]))
				}
				continue
			}
			full := strings.TrimSpace(line)
			for strings.HasSuffix(full, "\\") && i+1 < len(lines) {
				i++
				full = strings.TrimSuffix(full, "\\") + " " + strings.TrimSpace(lines[i])
			}
			full = strings.TrimPrefix(full, "$ ")
			c, ok, err := docParse(full)
			if err != nil {
				return out, fmt.Errorf("%s:%d: %v", name, lineNo, err)
			}
			if !ok {
				if full != "" && !strings.HasPrefix(full, "#") {
					last = -1 // output lines belong to the command right above
				}
				continue
			}
			c.where = fmt.Sprintf("%s:%d", name, lineNo)
			out = append(out, c)
			last = len(out) - 1
			continue
		}
		for _, m := range docSpanRE.FindAllStringSubmatch(line, -1) {
			span := strings.ReplaceAll(m[1], `\|`, "|") // a pipe escaped in a table
			if !strings.HasPrefix(span, "memoryd ") && !strings.HasPrefix(span, "go run ./cmd/memoryd ") {
				continue
			}
			c, ok, err := docParse(span)
			if err != nil {
				return out, fmt.Errorf("%s:%d: %v", name, lineNo, err)
			}
			if ok {
				c.where = fmt.Sprintf("%s:%d", name, lineNo)
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// docParse splits a shell line into words (quotes, backslashes, a trailing
// # comment) and returns it as a memoryd command when it is one.
func docParse(line string) (c docCommand, ok bool, err error) {
	words, quoted, err := docSplit(line)
	if err != nil || len(words) == 0 {
		return c, false, err
	}
	n := 0
	for n < len(words) && !quoted[n] && docEnvRE.MatchString(words[n]) {
		n++
	}
	switch {
	case n < len(words) && words[n] == "memoryd":
		n++
	case n+2 < len(words) && words[n] == "go" && words[n+1] == "run" && words[n+2] == "./cmd/memoryd":
		n += 3
	default:
		return c, false, nil
	}
	if n == len(words) {
		return c, false, nil // "memoryd" alone in prose: the name, not a command
	}
	for i := range n {
		if strings.Contains(words[i], "=") {
			c.env = append(c.env, words[i])
		}
	}
	c.text, c.args, c.quoted = strings.TrimSpace(line), words[n:], quoted[n:]
	return c, true, nil
}

var docEnvRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// docSplit splits line into shell words; quoted[i] says whether word i had a
// quoted part. An unquoted # at the start of a word begins a comment.
func docSplit(line string) (words []string, quoted []bool, err error) {
	var (
		cur    strings.Builder
		inWord bool
		q      bool
	)
	flush := func() {
		if inWord {
			words, quoted = append(words, cur.String()), append(quoted, q)
		}
		cur.Reset()
		inWord, q = false, false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord:
			flush()
			return words, quoted, nil
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, nil, fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(string(rs[i+1 : j]))
			inWord, q, i = true, true, j
		case r == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[j+1]) {
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, nil, fmt.Errorf("unterminated \" in %q", line)
			}
			inWord, q, i = true, true, j
		case r == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words, quoted, nil
}

// TestParseDocCommands checks the extraction on the cases the docs use.
func TestParseDocCommands(t *testing.T) {
	t.Parallel()
	md := "Run `memoryd failed` or `go run ./cmd/memoryd health --url`; `memoryd` alone is a name.\n" +
		"| x | `memoryd replay [--user U,V] [--since T \\| --from-seq N]` |\n" +
		"```sh\n" +
		"MEMORYD_X=1 go run ./cmd/memoryd enrich --user alice \"where do I live?\"   # prints it\n" +
		"# → Lisbon\n" +
		"nats req memory.enrich.alice '{}'\n" +
		"# → not memoryd's\n" +
		"$ memoryd facts set --user alice \\\n" +
		"    city 'Paris # not a comment'\n" +
		"```\n"
	cmds, err := parseDocCommands("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(cmds))
	for i, c := range cmds {
		words, syn := c.commandWords()
		got[i] = fmt.Sprintf("%s env=%q args=%q words=%q synopsis=%v expect=%q", c.where, c.env, c.args, words, syn, c.expect)
	}
	want := []string{
		`x.md:1 env=[] args=["failed"] words=["failed"] synopsis=false expect=[]`,
		`x.md:1 env=[] args=["health" "--url"] words=["health"] synopsis=false expect=[]`,
		`x.md:2 env=[] args=["replay" "[--user" "U,V]" "[--since" "T" "|" "--from-seq" "N]"] words=["replay"] synopsis=true expect=[]`,
		`x.md:4 env=["MEMORYD_X=1"] args=["enrich" "--user" "alice" "where do I live?"] words=["enrich"] synopsis=false expect=["Lisbon"]`,
		`x.md:8 env=[] args=["facts" "set" "--user" "alice" "city" "Paris # not a comment"] words=["facts" "set"] synopsis=false expect=[]`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fl := cmds[2].flagsNamed(); !slices.Equal(fl, []string{"user", "since", "from-seq"}) {
		t.Fatalf("flags named = %q", fl)
	}
}
