package app

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestLabelledMetricsReadZeroAtStart: the labelled series known at start
// are on /metrics, at 0, before their first event: the configured model's
// LLM requests and tokens, extraction durations by outcome and redactions
// by kind and place. Before, they appeared with their first event, so a
// rate() alert on them returned nothing instead of 0 (and missed that
// first event). memoryd_turns_extracted_total's HELP names every outcome
// it exports (it left out queued).
func TestLabelledMetricsReadZeroAtStart(t *testing.T) {
	t.Parallel()
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{},"context":[]}`))
	svc := startTestApp(t, func(c *Config) {
		c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model"
		c.Ops = OpsConfig{Addr: "127.0.0.1:0"}
	})
	resp, err := http.Get("http://" + svc.ops.ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	want := []string{
		`memoryd_llm_requests_total{model="fake-model",outcome="ok"} 0`,
		`memoryd_llm_requests_total{model="fake-model",outcome="error"} 0`,
		`memoryd_llm_requests_total{model="fake-model",outcome="rate_limited"} 0`,
		`memoryd_llm_requests_total{model="fake-model",outcome="refused"} 0`,
		`memoryd_llm_tokens_total{kind="prompt",model="fake-model"} 0`,
		`memoryd_llm_tokens_total{kind="completion",model="fake-model"} 0`,
	}
	for _, o := range worker.ExtractOutcomes() {
		want = append(want, `memoryd_extraction_duration_seconds_count{outcome="`+o+`"} 0`)
	}
	// Field reasons too (a walk: invalid_timestamp appeared with its first
	// dead letter).
	for _, r := range []string{"malformed", "token_mismatch", "invalid_timestamp", "invalid_id", "invalid_user_id"} {
		want = append(want, `memoryd_turns_rejected_total{reason="`+r+`"} 0`)
	}
	for _, k := range worker.RedactionKinds() {
		for _, where := range []string{worker.RedactedInTurn, worker.RedactedInMemory} {
			want = append(want, `memoryd_redactions_total{kind="`+k+`",where="`+where+`"} 0`)
		}
	}
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics right after start lacks %q", w)
		}
	}
	var help string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# HELP memoryd_turns_extracted_total ") {
			help = line
		}
	}
	for _, o := range worker.ExtractOutcomes() {
		if !strings.Contains(help, o) {
			t.Errorf("HELP of memoryd_turns_extracted_total does not name outcome %q: %s", o, help)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
