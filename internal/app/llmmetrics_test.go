package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// memoryd_llm_requests_total tells a request the model server refused (a
// key refused, a model unknown: a 4xx but 429) from its own failures: both
// were "error", so an operator could not tell a wrong key from an outage
// on a dashboard. The outcomes still add up to every request sent.
func TestLLMRequestOutcomes(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t,
		extractortest.Error(http.StatusUnauthorized, "bad key"),
		extractortest.Error(http.StatusBadGateway, "upstream down"),
		extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{}`, Header: http.Header{"Retry-After": {"0"}}},
		extractortest.Error(http.StatusNotFound, "no such model"),
		// Gateways that answer 200 with an error object: counted as the
		// code they carry, not as answered.
		extractortest.Reply{Body: `{"error":{"code":401,"message":"invalid api key"}}`},
		extractortest.Reply{Body: `{"error":{"code":429,"message":"slow down"}}`, Header: http.Header{"Retry-After": {"0"}}},
		extractortest.Reply{Body: `{"error":{"message":"upstream timeout"}}`},
	)
	// Every request sent (no probe gap): each of the replies is counted.
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "m", MaxProbeGap: -1}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		_, _ = llm.Extract(context.Background(), extractor.Input{UserID: "u", Turn: extractor.Turn{EventID: "e1", UserMessage: "I'm Ana", Timestamp: time.Now()}})
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newServiceCollector(&App{}, llm, "m"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "memoryd_llm_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"ok": 0, "refused": 3, "error": 2, "rate_limited": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("memoryd_llm_requests_total by outcome = %v, want %v", got, want)
			break
		}
	}
}
