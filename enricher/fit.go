package enricher

import (
	"bytes"
	"fmt"

	"github.com/memoryd/memoryd/events"
)

// What to do about one thing too large for any reply.
const (
	fromExport   = "read it from memory.export (which splits a line too long for one page)"
	raisePayload = "raise the NATS server's max_payload"
)

// The replies that publish may cut to fit the connection's max payload
// (see fitter): pages end earlier with their cursor at the last item kept,
// ranked results leave out the lowest.

// readAhead is a list reply read one item past its page's limit, to know
// whether a next page exists; cut, its cursor is the last item kept.
type readAhead[T any] struct {
	items []T
	limit int
	// reply is the page of kept items; last is the last one kept when a
	// next page follows (nil on the last page).
	reply func(kept []T, last *T) any
	// tooLarge says what to do about first, which alone does not fit.
	tooLarge func(first T) string
}

func (p readAhead[T]) listed() int { return min(len(p.items), p.limit) }
func (p readAhead[T]) least() int  { return 1 }

func (p readAhead[T]) keep(n int) any  { return p.cut(n, n) }
func (p readAhead[T]) shell(n int) any { return p.cut(n, 0) }
func (p readAhead[T]) item(i int) any  { return &p.items[i] }

// cut is the reply of n items, its cursor after the n-th, holding the
// first kept.
func (p readAhead[T]) cut(n, kept int) any {
	var last *T
	if n < len(p.items) {
		last = &p.items[n-1]
	}
	return p.reply(p.items[:kept], last)
}

func (p readAhead[T]) alone() string { return p.tooLarge(p.items[0]) }

// MarshalJSON is the whole page, for a reply that fits as it is.
func (p readAhead[T]) MarshalJSON() ([]byte, error) { return marshalNoHTML(p.keep(p.listed())) }

// contextPage is a context.list reply of items, read up to one past limit.
func contextPage(items []events.ContextItem, limit int) readAhead[events.ContextItem] {
	return readAhead[events.ContextItem]{items: items, limit: limit,
		reply: func(kept []events.ContextItem, last *events.ContextItem) any {
			reply := events.ContextListReply{Items: kept}
			if last != nil {
				reply.Next = &events.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID}
			}
			return reply
		},
		tooLarge: func(first events.ContextItem) string {
			return fmt.Sprintf("context item %d alone does not fit; %s, delete it, or %s", first.ID, fromExport, raisePayload)
		}}
}

// historyPage is a facts.history reply.
type historyPage struct{ events.FactHistoryReply }

func (p historyPage) listed() int { return len(p.Changes) }
func (p historyPage) least() int  { return 1 }

func (p historyPage) keep(n int) any  { return p.cut(n, n) }
func (p historyPage) shell(n int) any { return p.cut(n, 0) }
func (p historyPage) item(i int) any  { return &p.Changes[i] }

func (p historyPage) cut(n, kept int) any {
	r := p.FactHistoryReply
	if n < len(r.Changes) {
		r.NextBefore = r.Changes[n-1].ID
	}
	r.Changes = r.Changes[:kept]
	return r
}

func (p historyPage) alone() string {
	return fmt.Sprintf("change %d of %q alone does not fit; %s, or %s", p.Changes[0].ID, p.Key, fromExport, raisePayload)
}

// docsPage is a docs.list reply.
type docsPage struct{ events.DocsListReply }

func (p docsPage) listed() int { return len(p.Documents) }
func (p docsPage) least() int  { return 1 }

func (p docsPage) keep(n int) any  { return p.cut(n, n) }
func (p docsPage) shell(n int) any { return p.cut(n, 0) }
func (p docsPage) item(i int) any  { return &p.Documents[i] }

func (p docsPage) cut(n, kept int) any {
	r := p.DocsListReply
	if n < len(r.Documents) {
		r.Next = r.Documents[n-1].DocID
	}
	r.Documents = r.Documents[:kept]
	return r
}

func (p docsPage) alone() string {
	return fmt.Sprintf("document %q alone does not fit (its metadata); replace it with smaller metadata, or %s", p.Documents[0].DocID, raisePayload)
}

// factsPage is a facts.list reply of facts, read up to one past limit.
func factsPage(facts []events.Fact, limit int) readAhead[events.Fact] {
	return readAhead[events.Fact]{items: facts, limit: limit,
		reply: func(kept []events.Fact, last *events.Fact) any {
			reply := events.FactsReply{Facts: kept}
			if last != nil {
				reply.Next = &events.FactCursor{SourceAt: last.SourceAt, Key: last.Key}
			}
			return reply
		},
		tooLarge: func(first events.Fact) string {
			return fmt.Sprintf("fact %q alone does not fit; %s, or %s", first.Key, fromExport, raisePayload)
		}}
}

// searchResults is a search reply, best first: cut, it leaves out the
// lowest-ranked results and says so.
type searchResults struct{ events.SearchReply }

func (r searchResults) listed() int { return len(r.Results) }
func (r searchResults) least() int  { return 0 }

func (r searchResults) keep(n int) any {
	return events.SearchReply{Results: r.Results[:n], Truncated: true}
}

func (r searchResults) shell(int) any  { return r.keep(0) }
func (r searchResults) item(i int) any { return &r.Results[i] }

func (r searchResults) alone() string {
	return "lower max_results"
}

// withoutOversized is r without the results too large for a reply of
// limit bytes on their own, so that those ranked below them still come
// (as enrich drops an item over its budget): cut to its best results, one
// such item heading them left none, whatever max_results. Reports whether
// it dropped any.
func (r searchResults) withoutOversized(limit int) (fitter, bool) {
	// The reply's own bytes around one result: {"results":[],"truncated":true}.
	const envelope = 40
	var (
		kept []events.ContextItem
		buf  bytes.Buffer
	)
	for i, it := range r.Results {
		// Measured as the reply writes it (encodeReply: "<" is itself,
		// not \u003c), or an item that fits would be left out.
		if err := encodeReply(&buf, it); err == nil && buf.Len()+envelope <= limit {
			if kept != nil {
				kept = append(kept, it)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]events.ContextItem, 0, len(r.Results)-1), r.Results[:i]...)
		}
	}
	if kept == nil {
		return r, false
	}
	return searchResults{events.SearchReply{Results: kept, Truncated: true}}, true
}

// marshalNoHTML is the reply encoding of v, for the MarshalJSON of a reply
// with unexported fields.
func marshalNoHTML(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeReply(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
