package events_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependsOnNATSAlone keeps the wire contract light: a frontend importing
// events (Turn, Publisher, Client and the request/reply types) must not link
// the service's database or job queue, nor an OpenTelemetry SDK or exporter:
// besides nats.go it gets only OpenTelemetry's API (trace context
// propagation, trace.go), which does nothing unless the program traces.
func TestDependsOnNATSAlone(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("find the go command: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/memoryd/memoryd/events").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, banned := range []string{"jackc/pgx", "riverqueue", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc"} {
			if strings.Contains(dep, banned) {
				t.Errorf("events depends on %s; the wire contract must depend on nats.go and the OpenTelemetry API alone", dep)
			}
		}
	}
}
