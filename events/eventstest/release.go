package eventstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// nats-server releases some tests run on besides the machine's (Debian 12's
// 2.9.10, which the rest use). Users meet these, not only Debian's.
const (
	// ReleaseCompose is the last release of compose.yaml's line
	// (nats:2.10-alpine).
	ReleaseCompose = "v2.10.29"
	// ReleaseNewest is the newest release the Go module proxy serves.
	ReleaseNewest = "v2.15.2"
)

// releaseBuilds holds one build per release for the test binary's life.
var releaseBuilds sync.Map // version → *releaseBuild

type releaseBuild struct {
	once sync.Once
	bin  string
	err  error
}

// ReleaseBin returns a nats-server binary of version, built from source with
// `go install` through the Go module proxy the first time on a machine and
// kept under the user's cache directory (about 20 s of both cores on an
// idle machine; a fresh machine needs nothing installed by hand, and `make
// test` builds them before the tests: BuildRelease). The test fails, saying so, when
// it cannot be built.
func ReleaseBin(t testing.TB, version string) string {
	t.Helper()
	b, _ := releaseBuilds.LoadOrStore(version, new(releaseBuild))
	build := b.(*releaseBuild)
	build.once.Do(func() { build.bin, build.err = BuildRelease(version) })
	if build.err != nil {
		t.Fatalf("nats-server %s could not be built (`go install github.com/nats-io/nats-server/v2@%s` needs the Go module proxy): %v", version, version, build.err)
	}
	return build.bin
}

// BuildRelease builds nats-server version as ReleaseBin does, unless the
// user's cache directory holds it already, and returns its path. `make
// test` runs it for ReleaseCompose and ReleaseNewest before the tests
// (scripts/testnats), so that a fresh machine's build (up to 6 minutes at
// a load of 20 on 2 cores) does not count against a test package's
// timeout.
func BuildRelease(version string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "memoryd-test", "nats-server-"+version)
	bin := filepath.Join(dir, "nats-server")
	if out, err := exec.Command(bin, "--version").Output(); err == nil && strings.Contains(string(out), version) {
		return bin, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/nats-io/nats-server/v2@"+version)
	// GOFLAGS replaced: the Makefile's (and a machine's -mod=...) do not
	// apply to a module installed by version.
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-trimpath", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), version) {
		return "", fmt.Errorf("built %s, which reports %q (%v)", bin, out, err)
	}
	return bin, nil
}

// StartRelease is StartServer with a nats-server of version (ReleaseBin)
// and JetStream on, storing in a directory of the test's.
func StartRelease(t testing.TB, version string) *Server {
	t.Helper()
	dir := t.TempDir()
	return startServer(t, ReleaseBin(t, version), func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir}
	})
}

// Fetch pulls n messages from cons, waiting up to 10 s for each batch, and
// fails the test when one comes back empty.
func Fetch(t testing.TB, cons jetstream.Consumer, n int) []jetstream.Msg {
	t.Helper()
	var got []jetstream.Msg
	for len(got) < n {
		b, err := cons.Fetch(n-len(got), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		before := len(got)
		for m := range b.Messages() {
			got = append(got, m)
		}
		if len(got) == before {
			t.Fatalf("fetched %d of %d messages", len(got), n)
		}
	}
	return got
}
