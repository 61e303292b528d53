package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// BenchmarkEmbedUnderIngest: 600 turns of 40 users published in 15 waves
// 100 ms apart, as live frontends do, against an embeddings server that
// answers each request in 50 ms (a hosted API's round trip). Reports the
// seconds from the last turn extracted until every item had its vector,
// the requests and the mean texts a request. Each write's embed job holds
// an item or two; a running job claims the waiting ones, so the backlog
// goes in requests of many texts (docs/operations.md, "Embeddings (issue
// 17)").
//
//	go test -run '^$' -bench EmbedUnderIngest -benchtime 1x ./worker/
func BenchmarkEmbedUnderIngest(b *testing.B) {
	for range b.N {
		e := setup(b)
		srv := embeddingtest.New(b)
		srv.SetDelay(50 * time.Millisecond)
		stop := e.start(extractor.NewRules(), withEmbedder(embedder(b, srv, "m1"), -1))
		const users, waves = 40, 15
		for i := range waves {
			for u := range users {
				e.publish(events.Turn{ID: fmt.Sprintf("u%d-%d", u, i), UserID: fmt.Sprintf("u%d", u),
					UserMessage: fmt.Sprintf("turn %d of user %d about topic %d", i, u, i*7+u), AssistantResponse: "ok"})
			}
			time.Sleep(100 * time.Millisecond) // the pace of the load, not a synchronisation
		}
		e.waitDone(users * waves)
		extracted := time.Now()
		e.waitFor("every item embedded", func() (bool, string) {
			n, err := e.store.CountEmbeddings(e.ctx, "", "m1")
			return err == nil && n.Items >= users*waves && n.Embedded == n.Items, fmt.Sprintf("%+v %v", n, err)
		})
		lag := time.Since(extracted)
		stop()
		batches, texts := srv.Batches(), 0
		for _, n := range batches {
			texts += n
		}
		b.ReportMetric(lag.Seconds(), "s_behind_extraction")
		b.ReportMetric(float64(len(batches)), "requests")
		b.ReportMetric(float64(texts)/float64(len(batches)), "texts/request")
	}
}
