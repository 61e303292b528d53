package enricher_test

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestServerErrorsCountsOnly5xx: an endpoint's server_errors in
// $SRV.STATS counts the 5xx replies of its work, not the 404s and 409s the
// work answers (facts.get of a missing key, a stale export cursor).
func TestServerErrorsCountsOnly5xx(t *testing.T) {
	t.Parallel()
	h := start(t, storetest.New(t), func(c *enricher.Config) { c.MaxDocsSize = 10 })
	ctx := ctxT(t)
	if _, err := h.client.GetFact(ctx, "u", "nope"); svcCode(err) != 404 {
		t.Fatalf("facts.get of a missing key: %v, want a 404", err)
	}
	msg := h.raw(t, h.prefix+".context.delete.u", []byte(`{"user_id":"u","id":12345}`))
	if code, desc := errorCode(t, msg); code != 404 {
		t.Fatalf("context.delete of a missing item: %d %q, want a 404", code, desc)
	}
	msg = h.raw(t, h.prefix+".export.u", []byte(`{"user_id":"u","cursor":"not-a-cursor"}`))
	if code, desc := errorCode(t, msg); code != 409 {
		t.Fatalf("export with a stale cursor: %d %q, want a 409", code, desc)
	}
	// The documents cap's 507 is a 5xx: counted.
	if _, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "u", Collection: "c", DocID: "d", Content: "more than ten bytes"}); svcCode(err) != 507 {
		t.Fatalf("put over the cap: %v, want a 507", err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(h.raw(t, "$SRV.STATS.memoryd."+h.svc.ID(), nil).Data, &stats); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"facts_get": 0, "context_delete": 0, "export": 0, "docs_put": 1}
	for _, e := range stats.Endpoints {
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		var data struct {
			ServerErrors float64 `json:"server_errors"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatalf("%s: data %s: %v", e.Name, e.Data, err)
		}
		if data.ServerErrors != w {
			t.Errorf("%s: server_errors %v, want %v", e.Name, data.ServerErrors, w)
		}
		delete(want, e.Name)
	}
	if len(want) != 0 {
		t.Fatalf("endpoints missing from the stats: %v", want)
	}
}
