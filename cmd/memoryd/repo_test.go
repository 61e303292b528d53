package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	goversion "go/version"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// buildOutputs are the files a newcomer's builds leave in the repository:
// `go build ./cmd/X` at the root writes ./X, `make build` writes bin/.
func buildOutputs(t *testing.T) []string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(repoRoot, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if d.IsDir() {
			out = append(out, d.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("no commands under cmd/")
	}
	return append(out, "bin/memoryd", "cmd/memoryd/memoryd.test", "cpu.prof")
}

// TestNoBinariesCommittedAndBuildOutputsIgnored: no tracked file is an
// executable, and git ignores what the builds write. Skipped outside a git
// checkout (a source archive has nothing to check).
func TestNoBinariesCommittedAndBuildOutputsIgnored(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = repoRoot
	listing, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	// ELF, Mach-O (both byte orders, 32 and 64 bit) and PE executables.
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, {0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe}, []byte("MZ")}
	for name := range strings.SplitSeq(strings.TrimRight(string(listing), "\x00"), "\x00") {
		f, err := os.Open(filepath.Join(repoRoot, name))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		if slices.ContainsFunc(magics, func(m []byte) bool { return bytes.HasPrefix(head[:n], m) }) {
			t.Errorf("%s is a committed executable: git rm it", name)
		}
	}
	for _, out := range buildOutputs(t) {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", out)
		cmd.Dir = repoRoot
		if err := cmd.Run(); err != nil {
			t.Errorf(".gitignore does not ignore the build output %s", out)
		}
	}
}

// dockerignore reads .dockerignore's patterns.
func dockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not checked by this test", line)
		}
		patterns = append(patterns, line)
	}
	return patterns
}

// dockerIgnored reports whether Docker leaves name (slash-separated,
// relative to the context) out of the build context, for the pattern forms
// .dockerignore uses: a leading "/" is the root (Docker matches from the root
// anyway), "**/" is any number of directories, a trailing "/" a directory,
// and a pattern matching a directory excludes everything under it.
func dockerIgnored(patterns []string, name string) bool {
	parts := strings.Split(name, "/")
	for _, p := range patterns {
		p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		for start := 0; start < len(parts); start++ {
			if start > 0 && !anyDepth {
				break
			}
			for end := start + 1; end <= len(parts); end++ {
				if ok, _ := path.Match(p, strings.Join(parts[start:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// TestDockerignoreKeepsContextToSources: the Docker build context has no
// history, no binaries and no test output, but every file the image's build
// (`go build ./cmd/memoryd`, after `go mod download`) reads.
func TestDockerignoreKeepsContextToSources(t *testing.T) {
	t.Parallel()
	patterns := dockerignore(t)
	for _, name := range append(buildOutputs(t), ".git", ".git/config", "membench", "x.test", "enricher/testdata/fuzz/FuzzQuery/0") {
		if !dockerIgnored(patterns, name) {
			t.Errorf(".dockerignore lets %s into the build context", name)
		}
	}
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go build .* (\./cmd/\S+)`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatal("Dockerfile: no `go build ./cmd/...` line")
	}
	// The files of every package of this module the image builds, embedded
	// files included.
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Module,GoFiles,EmbedFiles", string(m[1]))
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir                 string
			Module              *struct{ Main bool }
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, name := range needed {
		if dockerIgnored(patterns, name) {
			t.Errorf(".dockerignore leaves out %s, which the image's build needs", name)
		}
	}
}

// goMod is what TestGoModTidyAndMinimal reads from go.mod.
type goMod struct {
	module, goVersion string
	// requires maps each required module to whether it is marked indirect.
	requires map[string]bool
}

func readGoMod(t *testing.T) goMod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := goMod{requires: map[string]bool{}}
	inRequire := false
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "module" && len(fields) == 2:
			m.module = fields[1]
		case fields[0] == "go" && len(fields) == 2:
			m.goVersion = fields[1]
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			inRequire = true
		case inRequire && fields[0] == ")":
			inRequire = false
		case inRequire || fields[0] == "require":
			if fields[0] == "require" {
				fields = fields[1:]
			}
			m.requires[fields[0]] = strings.Contains(line, "// indirect")
		}
	}
	if m.module == "" || m.goVersion == "" || len(m.requires) == 0 {
		t.Fatalf("go.mod: cannot read module, go line or requirements: %+v", m)
	}
	return m
}

// TestGoModTidyAndMinimal: the modules memoryd's packages (tests included)
// import are go.mod's direct requirements and no others; the go line is the
// highest go line among the modules the build uses, no higher, so that a
// frontend importing events or the enricher client is not forced to a newer
// Go than its dependencies need; the README states the same version.
func TestGoModTidyAndMinimal(t *testing.T) {
	t.Parallel()
	mod := readGoMod(t)
	cmd := exec.Command("go", "list", "-deps", "-test", "-json=ImportPath,Imports,Module,Standard,ForTest", "./...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type module struct {
		Path, GoVersion string
		Main            bool
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Module     *module
		Standard   bool
	}
	moduleOf := map[string]*module{}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
		if p.Module != nil {
			moduleOf[p.ImportPath] = p.Module
		}
	}
	direct := map[string]bool{}
	floor, floorModule := "", ""
	for _, p := range pkgs {
		if p.Module == nil {
			continue
		}
		if !p.Module.Main {
			if v := p.Module.GoVersion; v != "" && (floor == "" || goversion.Compare("go"+v, "go"+floor) > 0) {
				floor, floorModule = v, p.Module.Path
			}
			continue
		}
		for _, imp := range p.Imports {
			imp, _, _ = strings.Cut(imp, " ") // "path [test variant]"
			if m := moduleOf[imp]; m != nil && !m.Main {
				direct[m.Path] = true
			}
		}
	}
	for path := range direct {
		indirect, ok := mod.requires[path]
		switch {
		case !ok:
			t.Errorf("go.mod does not require %s, which memoryd imports: run go mod tidy", path)
		case indirect:
			t.Errorf("go.mod marks %s indirect, but memoryd imports it: run go mod tidy", path)
		}
	}
	for path, indirect := range mod.requires {
		if !indirect && !direct[path] {
			t.Errorf("go.mod requires %s directly, but no memoryd package imports it: run go mod tidy", path)
		}
	}
	if floor == "" {
		t.Fatal("go list reported no dependency go versions")
	}
	if mod.goVersion != floor {
		t.Errorf("go.mod says go %s; the dependencies need go %s (%s): set the go line to that, unless memoryd's own code needs a newer release (then say which feature here)", mod.goVersion, floor, floorModule)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Requires Go " + mod.goVersion + " or later"; !bytes.Contains(readme, []byte(want)) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
}

// TestMakeRunsShareTheBuildCacheOfGoRun: `make demo` and `make serve` build
// memoryd with the go command's own GOFLAGS, as the README's next commands
// (`go run ./cmd/memoryd serve`, the demo's "Try it yourself") do, not with
// the -trimpath the Makefile adds for the tests: -trimpath keys every
// package, the standard library's included, apart in the build cache, so a
// newcomer's first `go run` after `make demo` compiled everything again
// (4m14s after a 6m33s demo on a fresh 2-core machine, walk9).
func TestMakeRunsShareTheBuildCacheOfGoRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	env, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	want := "GOFLAGS='" + strings.TrimSpace(string(env)) + "' go run ./cmd/memoryd "
	for _, target := range []string{"demo", "serve"} {
		cmd := exec.Command("make", "-n", target)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "MEMORYD_SKIP_SERVICES=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		var run string
		for line := range strings.Lines(string(out)) {
			if strings.Contains(line, "go run ./cmd/memoryd") {
				run = strings.TrimSpace(line)
			}
		}
		if run != want+target {
			t.Errorf("make %s runs\n\t%s\nwant\n\t%s\n(the GOFLAGS a plain go run uses, without the Makefile's -trimpath)", target, run, want+target)
		}
	}
}
