// Package nodetest installs the npm packages of a test's Node.js program, so
// that tests run real JavaScript clients against memoryd.
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (the Node.js client tests need it; make test installs it): %v", bin, err)
		}
	}
	// The directory is named by its content, so that runs of other
	// checkouts (other versions of the files) never share one.
	h := sha256.New()
	contents := make([][]byte, len(files))
	for i, f := range files {
		var err error
		if contents[i], err = os.ReadFile(filepath.Join(src, f)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(contents[i]))
		h.Write(contents[i])
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "memoryd-test", name+"-"+hex.EncodeToString(h.Sum(nil)[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close() // releases the lock
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), contents[i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The stamp says npm ci completed in this directory, whose name is its
	// content.
	stamp := filepath.Join(dir, "node_modules", ".memoryd-installed")
	if _, err := os.Stat(stamp); err == nil {
		return dir
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".npm"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm could not install %s's packages into %s (is the npm registry reachable?): %v\n%s", name, dir, err, out)
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
