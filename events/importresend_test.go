package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestImportSendsATemporaryErrorAgain: an import request answered with a
// 500 (memoryd's store did not answer within its bound) is sent again,
// and the import completes; other codes are not, and a request failing
// every time stops after three sends (a heavy-user walk: one request in
// 90 took past 5 s, and a restore of tens of requests failed each time it
// was run again). The stand-in service answers as memoryd does.
func TestImportSendsATemporaryErrorAgain(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	file := events.ExportHeader + "\n" + `{"type":"fact","key":"name","value":"Ana","source_at":"2026-11-01T10:00:00Z","updated_at":"2026-11-01T10:00:00Z"}` + "\n"
	for _, tt := range []struct {
		name     string
		failures int    // answered with code before the first success
		code     string // the failures' code
		sends    int32
		fails    bool
	}{
		{"one 500", 1, "500", 2, false},
		{"two 500s", 2, "500", 3, false},
		{"500s throughout", 5, "500", 3, true},
		{"a 400", 1, "400", 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			user := strings.ReplaceAll(tt.name, " ", "-")
			client := events.NewClient(nc, prefix)
			var sends atomic.Int32
			sub, err := nc.Subscribe(client.Subject("import", user), func(m *nats.Msg) {
				n := sends.Add(1)
				reply := nats.NewMsg(m.Reply)
				if int(n) <= tt.failures {
					reply.Header.Set(micro.ErrorCodeHeader, tt.code)
					reply.Header.Set(micro.ErrorHeader, "memory store did not answer within 5s")
				} else {
					reply.Data, _ = json.Marshal(events.ImportReply{Imported: map[string]int64{"fact": 1}, MemoryID: "7"})
				}
				_ = m.RespondMsg(reply)
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			got, err := client.Import(context.Background(), user, strings.NewReader(file))
			var svc *events.ServiceError
			switch {
			case tt.fails && !errors.As(err, &svc):
				t.Fatalf("import: %v; want the service error", err)
			case !tt.fails && (err != nil || got.Imported["fact"] != 1):
				t.Fatalf("import: %+v, %v; want the fact imported", got, err)
			}
			if n := sends.Load(); n != tt.sends {
				t.Errorf("the request was sent %d times, want %d", n, tt.sends)
			}
		})
	}
}
