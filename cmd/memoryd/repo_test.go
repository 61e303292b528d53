package main

import (
	"bufio"
	"bytes"
	"encoding/json"
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
