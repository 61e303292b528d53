package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/events"
)

// TestSchemasMatchGoTypes: the committed docs/schemas are exactly what the Go
// wire types generate. After changing a wire type, run
// `go run ./cmd/memoryd schemas`.
func TestSchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	files, err := renderSchemas()
	if err != nil {
		t.Fatal(err)
	}
	dir := "../../docs/schemas"
	committed, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("%d committed schemas, %d generated", len(committed), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/schemas/%s is stale or missing (%v): run `go run ./cmd/memoryd schemas`", name, err)
		}
	}
}

func TestTurnSchemaContract(t *testing.T) {
	t.Parallel()
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	files, err := renderSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(files["turn_event.json"], &s); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.Required)
	if want := []string{"id", "timestamp", "user_id", "user_message"}; !slices.Equal(s.Required, want) {
		t.Fatalf("turn event required = %v, want %v (the contract)", s.Required, want)
	}
	for _, f := range []string{"conversation_id", "assistant_response", "memory", "metadata"} {
		if _, ok := s.Properties[f]; !ok {
			t.Errorf("turn event schema lacks %s", f)
		}
	}
}

// TestSchemasWriteOnlyIntoTheRepository: `memoryd schemas` writes to
// docs/schemas of the memoryd checkout it runs in (from any directory inside
// it), to --out when given, and elsewhere refuses without creating anything.
// Not parallel: it changes the working directory.
func TestSchemasWriteOnlyIntoTheRepository(t *testing.T) {
	schemas := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, append([]string{"schemas"}, args...))
		return out.String() + errOut.String(), code
	}
	entries := func(dir string) []string {
		t.Helper()
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	want := len(wireSchemas())

	// An unrelated directory, and one inside another module: an error that
	// names --out, and nothing written.
	for _, gomod := range []string{"", "module example.com/frontend\n\ngo 1.26.0\n"} {
		dir := t.TempDir()
		if gomod != "" {
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(dir)
		out, code := schemas()
		if code != 1 || !strings.Contains(out, "--out DIR") {
			t.Errorf("schemas in %s (go.mod %q): exit %d, %q; want 1 and a pointer to --out", dir, gomod, code, out)
		}
		left := 0 // go.mod, when the case has one
		if gomod != "" {
			left = 1
		}
		if names := entries(dir); len(names) != left {
			t.Errorf("schemas in %s without --out left %v", dir, names)
		}
		// --out writes exactly there, creating it.
		if out, code := schemas("--out", "out/schemas"); code != 0 {
			t.Fatalf("schemas --out: exit %d: %s", code, out)
		}
		if n := len(entries(filepath.Join(dir, "out", "schemas"))); n != want {
			t.Errorf("schemas --out wrote %d files, want %d", n, want)
		}
	}

	// Anywhere inside a memoryd checkout: its docs/schemas.
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte(moduleLine+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "cmd", "memoryd")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if out, code := schemas(); code != 0 {
		t.Fatalf("schemas inside the checkout: exit %d: %s", code, out)
	}
	if n := len(entries(filepath.Join(root, "docs", "schemas"))); n != want {
		t.Errorf("schemas wrote %d files to the checkout's docs/schemas, want %d", n, want)
	}
	if names := entries(sub); len(names) != 0 {
		t.Errorf("schemas wrote %v into the current directory", names)
	}
}

// propSchema is the part of a generated property schema the probes read.
type propSchema struct {
	Type      any      `json:"type"`
	Format    string   `json:"format"`
	Enum      []any    `json:"enum"`
	Pattern   string   `json:"pattern"`
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
}

func (p propSchema) is(typ string) bool {
	switch t := p.Type.(type) {
	case string:
		return t == typ
	case []any:
		return slices.Contains(t, any(typ))
	}
	return false
}

// probe is a message derived from a schema. valid says whether the schema
// accepts it; field is the field it tests (an invalid probe's error must
// name it); nullOf, when set, is a field sent as null, which must fare
// exactly as the same message without the field.
type probe struct {
	what   string
	body   map[string]any
	valid  bool
	field  string
	nullOf string
}

// schemaProbes derives, from a generated schema, messages on either side of
// every rule it states: required fields, non-blank text, byte limits
// (ASCII, so bytes and characters agree), numeric ranges, enums and null.
// base holds fields a valid message needs beyond the required ones.
func schemaProbes(t *testing.T, schema []byte, base map[string]any) []probe {
	t.Helper()
	var s struct {
		Properties map[string]propSchema `json:"properties"`
		Required   []string              `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	valid := map[string]any{}
	maps.Copy(valid, base)
	for _, f := range s.Required {
		switch p := s.Properties[f]; {
		case p.Format == "date-time":
			valid[f] = "2026-11-21T10:00:00Z"
		case f == "user_id":
			valid[f] = "alice"
		case p.is("string"):
			valid[f] = "x"
		case p.is("integer") && p.Minimum != nil:
			valid[f] = *p.Minimum
		default:
			t.Fatalf("required field %s of type %v: no probe value", f, p.Type)
		}
	}
	with := func(f string, v any) map[string]any {
		m := maps.Clone(valid)
		m[f] = v
		return m
	}
	probes := []probe{{what: "valid", body: valid, valid: true}}
	for f, p := range s.Properties {
		if slices.Contains(s.Required, f) {
			m := maps.Clone(valid)
			delete(m, f)
			probes = append(probes, probe{what: f + " missing", body: m, field: f})
		} else if p.is("null") {
			probes = append(probes, probe{what: f + " null", body: with(f, nil), nullOf: f})
		}
		if p.Format == "date-time" {
			// RFC 3339's offsets (Go's parser also takes an hour of 24
			// and a minute of 60) and the years the pattern states.
			for v, ok := range map[string]bool{"2026-11-21T10:00:00+23:59": true, "2026-11-21T10:00:00-00:00": true,
				"2026-11-21T10:00:00+24:00": false, "2026-11-21T10:00:00-01:60": false} {
				probes = append(probes, probe{what: f + "=" + v, body: with(f, v), valid: ok, field: f})
			}
			if p.Pattern != "" {
				// The pattern holds all that the service refuses of a
				// time's shape, for validators that take format
				// date-time as an annotation only (JSON Schema 2020-12's
				// default): the years, T and Z in capitals, the offsets.
				for v, ok := range map[string]bool{"1970-01-01T00:00:00Z": true, "9999-12-31T23:59:59Z": true,
					"1969-12-31T23:59:59Z": false, "0001-01-01T00:00:00Z": false,
					// The year is UTC's: 1970 there, behind UTC in 1969.
					"1969-12-31T23:30:00-01:00": true, "1969-12-31T20:00:00,5-04:00": true,
					"2026-11-21T10:00:00.5+23:59": true, "2026-11-21T10:00:00,5Z": true, "2026-11-21T10:00:00.123456789-00:00": true,
					"2026-11-21t10:00:00Z": false, "2026-11-21T10:00:00z": false, "2026-11-21 10:00:00Z": false,
					"2026-11-21T10:00:00+24:00": false, "2026-11-21T10:00:00-01:60": false, "2026-11-21T10:00:00+0100": false} {
					if re := regexp.MustCompile(p.Pattern); re.MatchString(v) != ok {
						t.Fatalf("%s: pattern %s on %s: %v, want %v", f, p.Pattern, v, !ok, ok)
					}
					probes = append(probes, probe{what: f + "=" + v, body: with(f, v), valid: ok, field: f})
				}
			}
		}
		if p.Pattern == `\S` {
			probes = append(probes, probe{what: f + " blank", body: with(f, " \t"), field: f})
		}
		if p.MaxLength != nil {
			n := *p.MaxLength
			probes = append(probes,
				probe{what: fmt.Sprintf("%s of %d bytes", f, n), body: with(f, strings.Repeat("a", n)), valid: true},
				probe{what: fmt.Sprintf("%s of %d bytes", f, n+1), body: with(f, strings.Repeat("a", n+1)), field: f})
		}
		step := 1.0
		if !p.is("integer") {
			step = 0.001
		}
		if p.Minimum != nil {
			probes = append(probes,
				probe{what: fmt.Sprintf("%s=%v", f, *p.Minimum), body: with(f, *p.Minimum), valid: true},
				probe{what: fmt.Sprintf("%s=%v", f, *p.Minimum-step), body: with(f, *p.Minimum-step), field: f})
		}
		if p.Maximum != nil {
			probes = append(probes,
				probe{what: fmt.Sprintf("%s=%v", f, *p.Maximum), body: with(f, *p.Maximum), valid: true},
				probe{what: fmt.Sprintf("%s=%v", f, *p.Maximum+step), body: with(f, *p.Maximum+step), field: f})
		}
		// What the schema leaves open must be open: text without a limit
		// or enum takes 300 KiB (more than any field limit but answer's),
		// numbers without a bound take any size, and an optional field
		// without null is refused when null.
		if p.is("string") && p.MaxLength == nil && p.Enum == nil && p.Format == "" {
			probes = append(probes, probe{what: f + " of 300 KiB", body: with(f, strings.Repeat("a", 300<<10)), valid: true})
		}
		if (p.is("integer") || p.is("number")) && p.Minimum == nil {
			probes = append(probes, probe{what: f + "=-1000000", body: with(f, -1000000), valid: true})
		}
		if (p.is("integer") || p.is("number")) && p.Maximum == nil {
			probes = append(probes, probe{what: f + "=1000000", body: with(f, 1000000), valid: true})
		}
		if !slices.Contains(s.Required, f) && !p.is("null") {
			probes = append(probes, probe{what: f + " null", body: with(f, nil), field: f})
		}
		if p.Enum != nil {
			for _, v := range p.Enum {
				if v != nil {
					probes = append(probes, probe{what: fmt.Sprintf("%s=%q", f, v), body: with(f, v), valid: true})
				}
			}
			probes = append(probes, probe{what: f + " outside the enum", body: with(f, "no-such-value"), field: f})
		}
	}
	return probes
}

// checkProbes runs every probe through accept, which returns nil when the
// receiver takes the message and its error otherwise.
func checkProbes(t *testing.T, name string, probes []probe, accept func(body map[string]any) error) {
	t.Helper()
	short := func(err error) string {
		if err == nil {
			return "accepted"
		}
		if s := err.Error(); len(s) > 200 {
			return s[:200] + "..."
		}
		return err.Error()
	}
	for _, p := range probes {
		err := accept(p.body)
		switch {
		case p.nullOf != "":
			absent := maps.Clone(p.body)
			delete(absent, p.nullOf)
			if errAbsent := accept(absent); (err == nil) != (errAbsent == nil) {
				t.Errorf("%s: %s: %s, but without the field: %s (the schema allows null as absent)", name, p.what, short(err), short(errAbsent))
			}
		case p.valid && err != nil:
			t.Errorf("%s: %s: the schema accepts it, memoryd refuses it: %s", name, p.what, short(err))
		case !p.valid && err == nil:
			t.Errorf("%s: %s: the schema refuses it, memoryd accepts it", name, p.what)
		case !p.valid && !strings.Contains(err.Error(), p.field):
			t.Errorf("%s: %s: refused for another reason: %s", name, p.what, short(err))
		}
	}
}

// TestSchemasMatchValidation: what the schemas state (required fields,
// non-blank text, byte limits, ranges, enums, null for optional fields) is
// what memoryd enforces, on both sides of every bound: the turn event
// against events.Decode, each request against a running enricher on the
// real NATS and Postgres.
func TestSchemasMatchValidation(t *testing.T) {
	t.Parallel()
	files, err := renderSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for name, rules := range fieldRules {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(files[name+".json"], &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for f := range rules {
			if _, ok := s.Properties[f]; !ok && f != rootRule {
				t.Errorf("fieldRules[%q] has a rule for %q, which is not a field", name, f)
			}
		}
	}

	turnProbes := schemaProbes(t, files["turn_event.json"], nil)
	checkProbes(t, "turn_event", turnProbes, func(body map[string]any) error {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = events.Decode(data)
		return err
	})

	nc, prefix, _ := startTestEnricher(t)
	client := events.NewClient(nc, prefix)
	// Fields a valid request needs beyond its required ones.
	bases := map[string]map[string]any{"clear.request": {"question": "x"}, "context_update.request": {"answer": "x"}, "docs_put.request": {"doc_id": "x"},
		"import.request": {"lines": []any{map[string]any{"type": "memoryd.export", "version": 1}}}}
	requests, puts := 0, 0
	for file, schema := range files {
		name, ok := strings.CutSuffix(file, ".request.json")
		if !ok {
			continue
		}
		requests++
		endpoint := strings.ReplaceAll(name, "_", ".")
		checkProbes(t, name+".request", schemaProbes(t, schema, bases[name+".request"]), func(body map[string]any) error {
			user, _ := body["user_id"].(string)
			if user == "" {
				user = "alice"
			}
			if c, _ := body["collection"].(string); endpoint == "docs.put" && c == "x" {
				// A collection of each probe: a put naming another
				// chunk_tokens than its collection's is refused.
				puts++
				body["collection"] = fmt.Sprintf("x%d", puts)
			}
			data, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := nc.Request(client.Subject(endpoint, user), data, 10*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", endpoint, err)
			}
			switch code := msg.Header.Get(micro.ErrorCodeHeader); code {
			case "400":
				return errors.New(msg.Header.Get(micro.ErrorHeader))
			case "", "404", "409", "501": // served; not found (facts.get); a pair another item holds (context.update); forget not enabled here
				return nil
			default:
				t.Errorf("%s %s: error %s: %s", endpoint, data[:min(len(data), 80)], code, msg.Header.Get(micro.ErrorHeader))
				return nil
			}
		})
	}
	if requests != 23 {
		t.Errorf("probed %d request schemas, want 23", requests)
	}
}
