package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestComposeFile checks compose.yaml's structure, since no Docker engine runs
// here to try it: services, healthchecks, dependencies, and that every
// MEMORYD_* variable it sets is one memoryd reads.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       any               `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Profiles    []string          `yaml:"profiles"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"postgres", "nats", "memoryd", "ollama"} {
		svc, ok := c.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		if len(svc.Healthcheck.Test) < 2 || svc.Healthcheck.Test[0] != "CMD" {
			t.Errorf("service %s: healthcheck %v", name, svc.Healthcheck.Test)
		}
		for _, v := range svc.Volumes {
			named, _, _ := strings.Cut(v, ":")
			if _, ok := c.Volumes[named]; !ok {
				t.Errorf("service %s uses undeclared volume %s", name, named)
			}
		}
	}
	if !slices.Contains(c.Services["nats"].Command, "-js") {
		t.Error("nats runs without JetStream")
	}
	if !slices.Contains(c.Services["ollama"].Profiles, "llm") {
		t.Error("ollama is not behind the llm profile")
	}
	m := c.Services["memoryd"]
	for _, dep := range []string{"postgres", "nats"} {
		if m.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("memoryd does not wait for %s to be healthy", dep)
		}
	}
	if m.Build == nil || m.Command[0] != "serve" {
		t.Errorf("memoryd build %v command %v", m.Build, m.Command)
	}
	if _, err := os.Stat("../../Dockerfile"); err != nil {
		t.Errorf("memoryd builds from a Dockerfile: %v", err)
	}
	// The healthcheck runs a real subcommand.
	if hc := m.Healthcheck.Test; len(hc) < 3 || hc[1] != "/memoryd" || !slices.ContainsFunc(commands(), func(c command) bool { return c.name == hc[2] }) {
		t.Errorf("memoryd healthcheck %v does not run a memoryd command", hc)
	}
	// Every variable is one serve reads.
	var o serveOptions
	f := newFlags("serve", "")
	o.register(f)
	for k := range m.Environment {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "MEMORYD_"), "_", "-"))
		if f.Lookup(name) == nil {
			t.Errorf("compose sets %s, which memoryd serve does not read", k)
		}
	}
	if !strings.Contains(m.Environment["MEMORYD_DATABASE_URL"], "@postgres:5432/") || !strings.Contains(m.Environment["MEMORYD_NATS_URL"], "nats:4222") {
		t.Errorf("memoryd does not point at the compose services: %v", m.Environment)
	}
}
