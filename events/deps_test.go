package events_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// frontendModules are the modules a frontend's binary links for package
// events, as README.md, docs/protocol.md and the package doc list them:
// nats.go and its own dependencies, and OpenTelemetry's trace API (trace
// context propagation, trace.go), which does nothing unless the program
// traces, with the hash it uses. A module added here is one more for every
// frontend: say so in those docs too.
var frontendModules = []string{
	"github.com/cespare/xxhash/v2", // by go.opentelemetry.io/otel/attribute
	"github.com/klauspost/compress",
	"github.com/memoryd/memoryd",
	"github.com/nats-io/nats.go",
	"github.com/nats-io/nkeys",
	"github.com/nats-io/nuid",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/trace",
	"golang.org/x/crypto",
	"golang.org/x/sys",
}

// TestFrontendDependencies keeps the wire contract light: a frontend
// importing events (Turn, Publisher, Client and the request/reply types)
// links the modules of frontendModules and no other: not the service's
// database or job queue, nor an OpenTelemetry SDK or exporter. (Its
// module graph, go list -m all, still lists memoryd's server modules:
// they are required by memoryd's go.mod, not built in.)
func TestFrontendDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("find the go command: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "github.com/memoryd/memoryd/events").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list -deps listed nothing:\n%s", out)
	}
	linked := map[string]bool{}
	for _, line := range lines {
		pkg, module, _ := strings.Cut(line, " ")
		for _, banned := range []string{"jackc/pgx", "riverqueue", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc"} {
			if strings.Contains(pkg, banned) {
				t.Errorf("events depends on %s; the wire contract must not link the service's modules nor an OpenTelemetry SDK", pkg)
			}
		}
		if module == "" {
			continue // the standard library
		}
		linked[module] = true
		if !slices.Contains(frontendModules, module) {
			t.Errorf("events links module %s (package %s), which the docs do not list among a frontend's (frontendModules)", module, pkg)
		}
	}
	for _, m := range frontendModules {
		if !linked[m] {
			t.Errorf("module %s is listed among a frontend's but events no longer links it: take it out of frontendModules and the docs", m)
		}
	}
}
