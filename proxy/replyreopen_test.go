package proxy

import "testing"

// TestReplyStreamAChunkAfterTheFinish: a chunk of a choice after its
// finish reason, with none of its own (Azure OpenAI's asynchronous content
// filter sends such annotations), does not open the choice again: a stream
// ending without [DONE] after it is whole.
func TestReplyStreamAChunkAfterTheFinish(t *testing.T) {
	body := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":null,"content_filter_results":{}}]}` + "\n\n"
	a := reply{streamed: true}
	a.feed([]byte(body))
	a.end()
	if a.brokeOff() || !a.done() {
		t.Fatalf("broke off %v, done %v; want a whole reply", a.brokeOff(), a.done())
	}
}
