package app_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph holds the packages to the one-way graph docs/architecture.md
// draws: cmd wires through app; app composes worker, enricher, store and
// extractor; worker uses extractor, embedding and store; enricher uses store,
// ranking and embedding (the stored vector form and its search, for hybrid
// retrieval; issue 17); both use chunker to cut knowledge base documents
// (issue 19); extractor and embedding read model servers' error replies
// with internal/modelerr, and their API keys and NATS's password kept in
// files with internal/secretfile; worker, extractor and enricher redact secrets
// with redact; extractor and agenttools spell fact keys alike with
// internal/factkey; store, ranking, chunker, redact and the wire contract
// (events) import no sibling. Test files
// are not counted: a test may assemble what it checks.
func TestImportGraph(t *testing.T) {
	const mod = "github.com/memoryd/memoryd/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string][]string{
		"events":     {},
		"ranking":    {},
		"migrations": {},
		"embedding":  {"internal/modelerr", "internal/secretfile"},
		"chunker":    {},
		"apikeys":    {},
		"redact":     {},
		// What model servers say when they fail, read alike by the LLM
		// and the embeddings clients.
		"internal/modelerr": {},
		// How a model's and an agent's fact keys are spelled, kept out
		// of events so that frontends do not link x/text.
		"internal/factkey": {},
		// How long an HTTP server waits for a request's body, the
		// proxy's and the MCP server's alike.
		"internal/bodytime": {},
		// net/http's server errors through the service's logger, the
		// ops listener's, the proxy's and the MCP server's alike.
		"internal/httperrlog": {},
		// Credentials kept in files, read again when they change: NATS's
		// password and token, the model servers' API keys.
		"internal/secretfile": {},
		// The WWW-Authenticate challenge of a 401 to a bearer key, the
		// proxy's and the MCP server's alike.
		"internal/authchallenge": {},
		"proxy":                  {"events", "internal/authchallenge", "internal/bodytime", "internal/httperrlog", "internal/secretfile"},
		"agenttools":             {"events", "internal/authchallenge", "internal/bodytime", "internal/factkey", "internal/httperrlog"},
		"store":                  {"migrations"},
		"extractor":              {"events", "internal/factkey", "internal/modelerr", "internal/secretfile", "redact"},
		"worker":                 {"chunker", "embedding", "events", "extractor", "redact", "store"},
		"enricher":               {"chunker", "embedding", "events", "ranking", "redact", "store"},
		"internal/app":           {"embedding", "enricher", "events", "extractor", "internal/authchallenge", "internal/httperrlog", "internal/secretfile", "migrations", "store", "worker"},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		var own []string
		for _, imp := range fields[1:] {
			if rest, ok := strings.CutPrefix(imp, mod); ok {
				own = append(own, rest)
			}
		}
		for _, imp := range own {
			if imp == "internal/app" && !strings.HasPrefix(pkg, "cmd/") {
				t.Errorf("%s imports internal/app: only commands assemble the service", pkg)
			}
			if strings.HasPrefix(imp, "cmd/") {
				t.Errorf("%s imports %s: nothing imports a command", pkg, imp)
			}
		}
		want, ruled := allowed[pkg]
		if !ruled {
			continue
		}
		seen++
		for _, imp := range own {
			if !slices.Contains(want, imp) {
				t.Errorf("%s imports %s; it may import only %v", pkg, imp, want)
			}
		}
	}
	if seen != len(allowed) {
		t.Fatalf("go list showed %d of the %d ruled packages:\n%s", seen, len(allowed), out)
	}
}
