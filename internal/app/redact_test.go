package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// secrets are the sensitive values the redaction tests publish or have the
// model return; none may be stored or recalled. Each is long or shaped enough
// (a space, a dash) that no timestamp, id or hash in a row can hold it by
// chance: a 4-digit PIN once matched a migration row's timestamp.
var secrets = []string{"hunter2", "4111 1111", "4111-1111", "5500 0055", "sk-abcdefghij", "123-45-6789", "73915048"}

// TestRulesExtractionStoresNoSecret: a turn holding a password, card
// numbers, an SSN and a PIN, extracted by the rules extractor, leaves none of
// them in any table, and enrich for "what is my password" recalls the turn
// with markers in their place.
func TestRulesExtractionStoresNoSecret(t *testing.T) {
	t.Parallel()
	svc := startTestApp(t, nil)
	publishAndWait(t, svc, "ana", events.Turn{ID: "s1", UserID: "ana", ConversationID: "c1",
		UserMessage:       "my password is hunter2 and my card is 4111 1111 1111 1111, SSN 123-45-6789, pin: 73915048. I live in Lisbon",
		AssistantResponse: "Noted. I'll remember the card 5500 0055 5555 5559 too.",
		Timestamp:         time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)})

	reply := enrichNoSecret(t, svc, "ana", "what is my password")
	if !strings.Contains(reply, "[redacted:password]") || !strings.Contains(reply, "[redacted:card]") {
		t.Errorf("enrich did not recall the redacted turn: %s", reply)
	}
	assertNoSecretStored(t, svc)
	if loc, err := svc.store.Fact(context.Background(), "ana", "location"); err != nil || loc.Value != "Lisbon" {
		t.Errorf("location = %+v, %v; the rest of the turn is still extracted", loc, err)
	}
	for _, c := range []struct {
		kind, where string
		want        float64
	}{{"password", "turn", 2}, {"card", "turn", 2}, {"ssn", "turn", 1}, {"password", "memory", 0}} {
		if got := redactions(t, svc, c.kind, c.where); got != c.want {
			t.Errorf("memoryd_redactions_total{kind=%q,where=%q} = %v, want %v", c.kind, c.where, got, c.want)
		}
	}
}

// TestModelOutputStoresNoSecret: a model that returns secrets the turn does
// not hold (a password fact, a card in another fact, a password and an API
// key in a context answer) gets none of them stored: the save path redacts
// every extraction, and a fact left without content is dropped. The PIN in
// the turn never reaches the model.
func TestModelOutputStoresNoSecret(t *testing.T) {
	t.Parallel()
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{"password":"hunter2","name":"Ana","bank_card":"4111-1111-1111-1111"},`+
		`"context":[{"q":"What is my password?","a":"Your password is hunter2 and your key is sk-abcdefghijklmnopqrstuvwx"}]}`))
	svc := startTestApp(t, func(c *Config) { c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model" })
	publishAndWait(t, svc, "ana", events.Turn{ID: "m1", UserID: "ana", UserMessage: "please remember my login details, my pin is 73915048",
		Timestamp: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)})

	reply := enrichNoSecret(t, svc, "ana", "what is my password")
	if !strings.Contains(reply, "[redacted:password]") || !strings.Contains(reply, "[redacted:api_key]") || !strings.Contains(reply, "Ana") {
		t.Errorf("enrich did not recall the redacted memory: %s", reply)
	}
	assertNoSecretStored(t, svc)
	// Turns are recorded redacted, so the model is never shown the PIN.
	if sent := string(llm.LastRequest()); strings.Contains(sent, "73915048") || !strings.Contains(sent, "[redacted:password]") {
		t.Errorf("the model was sent %s", sent)
	}
	facts, err := svc.store.Facts(context.Background(), "ana", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].Key != "name" {
		t.Errorf("facts = %+v; want only name (password and bank_card held nothing but a secret)", facts)
	}
	for _, c := range []struct {
		kind string
		want float64
	}{{"password", 2}, {"card", 1}, {"api_key", 1}} {
		if got := redactions(t, svc, c.kind, "memory"); got != c.want {
			t.Errorf("memoryd_redactions_total{kind=%q,where=\"memory\"} = %v, want %v", c.kind, got, c.want)
		}
	}
}

// enrichNoSecret asks enrich for message with every fact and a low
// threshold, fails the test if the reply holds a secret, and returns the
// reply as JSON.
func enrichNoSecret(t *testing.T, svc *App, user, message string) string {
	t.Helper()
	threshold, results := 0.0, 50
	reply, err := events.NewClient(svc.nc, svc.cfg.Prefix).Enrich(context.Background(),
		events.EnrichRequest{UserID: user, Message: message, Threshold: &threshold, MaxResults: &results})
	if err != nil || reply.Degraded {
		t.Fatalf("enrich = %+v, %v", reply, err)
	}
	data, err := json.Marshal(reply)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(data), s) {
			t.Errorf("enrich %q returned the secret %q: %s", message, s, data)
		}
	}
	return string(data)
}

// assertNoSecretStored reads every row of every table in the app's schema
// (turns, facts, fact history, context, usage, River's jobs) as text and
// fails the test on any secret found.
func assertNoSecretStored(t *testing.T, svc *App) {
	t.Helper()
	ctx := context.Background()
	pool := svc.store.Pool()
	rows, err := pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 5 {
		t.Fatalf("found only tables %v in the schema", tables)
	}
	for _, table := range tables {
		for _, s := range secrets {
			var n int
			// The table name comes from the catalogue, quoted.
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` r WHERE strpos(r::text, $1) > 0`, s).Scan(&n); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			if n > 0 {
				t.Errorf("table %s holds %d rows with the secret %q", table, n, s)
			}
		}
	}
}

// redactions reads memoryd_redactions_total{kind, where} from the app's
// registry; 0 when never counted.
func redactions(t *testing.T, svc *App, kind, where string) float64 {
	t.Helper()
	families, err := svc.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "memoryd_redactions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["where"] == where {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
