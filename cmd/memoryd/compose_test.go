package main

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
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
			Ports       []string          `yaml:"ports"`
			Profiles    []string          `yaml:"profiles"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
				Required  *bool  `yaml:"required"`
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

	// What the README's "Docker Compose" section promises about the file.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Docker Compose\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if section == "" {
		t.Fatal(`README.md has no "## Docker Compose" section`)
	}

	// Host ports: on 127.0.0.1 only, never a port a local server of the
	// same kind listens on, and the ones the README names.
	localDefaults := map[string]string{
		"5432": "PostgreSQL", "4222": "NATS", "8222": "NATS monitoring",
		"11434": "Ollama", "9090": "Prometheus and memoryd's documented --http",
	}
	hostPort := map[string]string{} // service -> host port
	for name, svc := range c.Services {
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("service %s publishes %q: want 127.0.0.1:HOST:CONTAINER", name, p)
				continue
			}
			if what, ok := localDefaults[parts[1]]; ok {
				t.Errorf("service %s publishes host port %s, which a local %s uses", name, parts[1], what)
			}
			hostPort[name] = parts[1]
			if !strings.Contains(section, "127.0.0.1:"+parts[1]) {
				t.Errorf("README's Docker Compose section does not name %s's host port 127.0.0.1:%s", name, parts[1])
			}
		}
	}
	for _, name := range []string{"postgres", "nats", "memoryd"} {
		if hostPort[name] == "" {
			t.Errorf("service %s publishes no host port", name)
		}
	}
	for k, want := range map[string]string{
		"MEMORYD_NATS_URL":     "nats://127.0.0.1:" + hostPort["nats"],
		"MEMORYD_DATABASE_URL": "postgres://postgres@127.0.0.1:" + hostPort["postgres"] + "/memoryd",
	} {
		if !strings.Contains(section, k+"="+want) {
			t.Errorf("README's Docker Compose section does not show %s=%s... for the CLI on the host", k, want)
		}
	}

	// The llm profile: memoryd's model settings pass through from .env or
	// the shell, empty by default; memoryd waits for Ollama when the profile
	// runs it; the README's .env points at the ollama service and pulls the
	// model it names.
	llmVars := []string{"MEMORYD_LLM_BASE_URL", "MEMORYD_LLM_MODEL"}
	for _, k := range llmVars {
		if got, want := m.Environment[k], fmt.Sprintf("${%s:-}", k); got != want {
			t.Errorf("memoryd's %s is %q, want %q (set from .env or the shell, empty: offline rules)", k, got, want)
		}
	}
	if d, ok := m.DependsOn["ollama"]; !ok || d.Condition != "service_healthy" || d.Required == nil || *d.Required {
		t.Errorf("memoryd does not wait for the llm profile's ollama when it runs (depends_on ollama: service_healthy, required: false): %+v", d)
	}
	env := map[string]string{}
	for _, kv := range regexp.MustCompile(`(MEMORYD_LLM_[A-Z_]+)=([^\s'\\]+)`).FindAllStringSubmatch(section, -1) {
		env[kv[1]] = kv[2]
	}
	for _, k := range llmVars {
		if env[k] == "" {
			t.Fatalf("README's Docker Compose section does not show %s=... for .env", k)
		}
	}
	u, err := url.Parse(env["MEMORYD_LLM_BASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	if svc, ok := c.Services[u.Hostname()]; !ok || !slices.Contains(svc.Profiles, "llm") || u.Port() != "11434" || u.Path != "/v1" {
		t.Errorf("README's MEMORYD_LLM_BASE_URL=%s is not the llm profile's Ollama service at :11434/v1", u)
	}
	if pull := "docker compose exec ollama ollama pull " + env["MEMORYD_LLM_MODEL"]; !strings.Contains(section, pull) {
		t.Errorf("README's Docker Compose section does not pull the model it configures: want %q", pull)
	}
	if !strings.Contains(section, "docker compose --profile llm up -d") {
		t.Error("README's Docker Compose section does not start the llm profile")
	}
	// Ollama's default context (4,096 tokens below 24 GiB of VRAM) cuts a
	// long turn's request silently, instructions first (an LLM walk: about
	// 12,000 tokens for a long turn): the service gives it the context the
	// README names.
	ctxLen := c.Services["ollama"].Environment["OLLAMA_CONTEXT_LENGTH"]
	if n, err := strconv.Atoi(ctxLen); err != nil || n < 16384 || !strings.Contains(section, "OLLAMA_CONTEXT_LENGTH="+ctxLen) {
		t.Errorf("ollama's OLLAMA_CONTEXT_LENGTH is %q: want at least 16384, named in README's Docker Compose section", ctxLen)
	}
}
