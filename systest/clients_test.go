package systest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/nodetest"
	"github.com/memoryd/memoryd/store/storetest"
)

// clientSteps are the steps each client in testdata/clients reports with
// "ok <step>": a turn published with its JetStream ack, enrich finding it,
// search and stats, forget, the documented error replies, and that its
// credential can reach no other user.
var clientSteps = []string{"publish", "enrich", "search", "stats", "forget", "errors", "isolation"}

// TestNonGoClientsFromProtocolDoc: frontends written in Node.js (the `nats`
// npm client) and in C (libnats), from docs/protocol.md alone by someone who
// did not read memoryd's Go code, work end to end against a `memoryd serve`
// run as the docs say: on a nats-server whose users have exactly the
// documented permission blocks (operations.md's memoryd block, protocol.md's
// frontend block plus the forget grant protocol.md tells a frontend offering
// "delete my data" to add), with the documented inbox prefix. Each client
// publishes turns, waits for them on its memory changes, enriches, searches,
// reads stats, forgets, checks the error replies, and fails to publish or
// request for another user. The clients are in testdata/clients; the
// npm package is pinned by its package-lock.json, libnats is Debian's
// libnats-dev (scripts/testdeps.sh installs both for make test).
func TestNonGoClientsFromProtocolDoc(t *testing.T) {
	t.Parallel()
	light(t)
	node := nodetest.Install(t, filepath.Join("testdata", "clients", "node"), "nats-node", "package.json", "package-lock.json", "client.mjs")
	cClient := natsCClient(t)

	var memorydBlock, frontendBlock string
	for _, b := range permDocBlocks(t) {
		switch {
		case b.kind == "memoryd" && b.file == "docs/operations.md" && memorydBlock == "":
			memorydBlock = b.text
		case b.kind == "frontend" && b.file == "docs/protocol.md" && frontendBlock == "":
			frontendBlock = b.text
		}
	}
	if memorydBlock == "" || frontendBlock == "" {
		t.Fatal("docs/operations.md's memoryd or docs/protocol.md's frontend permissions block is missing")
	}
	const turnsGrant = `"memory.turns.alice",`
	if !strings.Contains(frontendBlock, turnsGrant) {
		t.Fatalf("protocol.md's frontend block does not grant %s:\n%s", turnsGrant, frontendBlock)
	}
	// The grant protocol.md says to add for a frontend that offers "delete
	// my data".
	frontendBlock = strings.Replace(frontendBlock, turnsGrant, turnsGrant+` "memory.forget.alice",`, 1)

	dir := t.TempDir()
	conf := permConf(t, dir, memorydBlock, permUser{"alice_frontend", "alice-pw", frontendBlock})
	url := permStartNATS(t, dir, conf)

	dbURL := storetest.Migrated(t) // serve finds nothing to migrate: stopped by startServe's cleanup
	httpAddr := fmt.Sprintf("127.0.0.1:%d", eventstest.FreePort(t))
	serve := startServe(t, nil, "--database-url", withPoolCap(dbURL, servePoolConns), "--nats-url", url,
		"--nats-user", "memoryd", "--nats-password", "memoryd-pw", "--http", httpAddr,
		"--log-format", "json", "--workers", "2", "--shutdown-timeout", "5s")
	waitFor(t, "memoryd serve to be ready", time.Minute, func() (bool, string) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, serve)

	env := []string{"NATS_URL=" + url, "NATS_USER=alice_frontend", "NATS_PASS=alice-pw", "MEMORYD_USER=alice",
		"MEMORYD_PREFIX=memory"}
	// One after the other: each forgets alice at its end.
	for _, c := range []struct {
		name string
		dir  string
		argv []string
	}{
		{"node", node, []string{"node", "client.mjs"}},
		{"c", filepath.Dir(cClient), []string{cClient}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
			cmd.Dir = c.dir
			cmd.Env = append(childEnv(env...), "RUN_ID="+c.name+strconv.FormatInt(time.Now().UnixNano(), 36))
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			if err != nil {
				t.Fatalf("the %s client failed: %v\nstdout:\n%s\nstderr:\n%s\nmemoryd log tail:\n%s", c.name, err, out.String(), errOut.String(), serve.tail())
			}
			done := map[string]bool{}
			for _, line := range strings.Split(out.String(), "\n") {
				if step, ok := strings.CutPrefix(line, "ok "); ok {
					done[strings.TrimSpace(step)] = true
				}
			}
			for _, step := range clientSteps {
				if !done[step] {
					t.Errorf("the %s client exited 0 without reporting step %q:\n%s", c.name, step, out.String())
				}
			}
		})
	}

	// Seen from memoryd's side: the stream holds no turn for anyone but
	// alice, and nothing of alice's survived the clients' forgets.
	md, err := nats.Connect(url, nats.UserInfo("memoryd", "memoryd-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	js, err := jetstream.New(md)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "MEMORY_TURNS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("memory.turns.>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Errorf("after both clients forgot alice, the turn stream still holds %v", info.State.Subjects)
	}
}

// natsCClient compiles testdata/clients/c/client.c against libnats into a
// cache directory (again only when the source changed) and returns the
// binary's path.
func natsCClient(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "clients", "c", "client.c"))
	if err != nil {
		t.Fatal(err)
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "libnats").Output()
	if err != nil {
		t.Fatalf("libnats-dev is not installed (needed for the C client test): run make test, whose scripts/testdeps.sh installs it, or apt-get install libnats-dev pkg-config (%v)", err)
	}
	sum := sha256.Sum256(append(src, flags...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "memoryd-test", "nats-c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(bin); err == nil {
		return bin
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	// Built under a temporary name and renamed, so that a parallel run never
	// executes a half-written binary.
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	args := append([]string{"-O1", "-Wall", "-pthread", "-o", tmp, filepath.Join("testdata", "clients", "c", "client.c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc could not build the C client: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestProtocolDocCTokenIsTheClients: the C user_token of protocol.md ("The
// user token") is, verbatim, the one the C client above compiles and
// checks against the document's examples (a C frontend author had only the
// TypeScript one to go by).
func TestProtocolDocCTokenIsTheClients(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := os.ReadFile(filepath.Join("testdata", "clients", "c", "client.c"))
	if err != nil {
		t.Fatal(err)
	}
	const start = "```c\n/* id's subject token"
	i := strings.Index(string(doc), start)
	if i < 0 {
		t.Fatal("protocol.md has no C user_token block")
	}
	block := string(doc[i+len("```c\n"):])
	block = block[:strings.Index(block, "```")]
	if !strings.Contains(string(client), block) {
		t.Fatalf("protocol.md's C user_token is not client.c's:\n%s", block)
	}
}
