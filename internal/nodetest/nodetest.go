// Package nodetest installs the npm packages of a Node.js program that
// tests (real JavaScript clients against memoryd) and tools (memeval's
// local embedding models) run.
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// Install copies files (package.json, package-lock.json and the program)
// from the directory src into the user's cache directory under
// memoryd-test/name-<hash of the files> (package-lock.json among them),
// runs npm ci there unless it was done before, and returns that directory: run the program with it as the
// working directory (an ES module finds its packages next to itself only).
// Concurrent installs of the same name, from other test processes, wait
// for each other on a file lock. It fails the test, in one sentence, when
// node or npm is missing or the registry cannot be reached.
func Install(t testing.TB, src, name string, files ...string) string {
	t.Helper()
	contents := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		contents[f] = b
	}
	dir, err := Prepare(name, contents)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Prepare is Install for a program whose files (name to content) are in
// hand: it returns the directory holding them with their packages
// installed, or an error saying in one sentence what is missing.
func Prepare(name string, files map[string][]byte) (string, error) {
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%s is not installed (make test installs it; on Debian: apt-get install nodejs npm): %w", bin, err)
		}
	}
	// The directory is named by its content, so that runs of other
	// checkouts (other versions of the files) never share one.
	names := slices.Sorted(maps.Keys(files))
	h := sha256.New()
	for _, f := range names {
		fmt.Fprintf(h, "%s %d\n", f, len(files[f]))
		h.Write(files[f])
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "memoryd-test", name+"-"+hex.EncodeToString(h.Sum(nil)[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lf, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lf.Close() // releases the lock
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	for _, f := range names {
		if err := os.WriteFile(filepath.Join(dir, f), files[f], 0o644); err != nil {
			return "", err
		}
	}
	// The stamp says npm ci completed in this directory, whose name is its
	// content.
	stamp := filepath.Join(dir, "node_modules", ".memoryd-installed")
	if _, err := os.Stat(stamp); err == nil {
		return dir, nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".npm"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("npm could not install %s's packages into %s (is the npm registry reachable?): %w", name, dir, err), errors.New(string(out)))
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}
