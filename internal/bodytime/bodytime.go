// Package bodytime bounds how long an HTTP server waits for a request's
// body, for the proxy and the MCP server alike.
package bodytime

import (
	"net/http"
	"time"
)

// Bound gives every request h serves that has a body d to send it, from
// the handler's start: the handler's own read of it, and net/http's read
// of a body the handler left unread (a 401, a probe, a 404), which it does
// before the answer's headers (up to 256 KiB): without a deadline, a client
// without a key held such a request open, unanswered, by never sending the
// body it announced. A read past the deadline fails with an error wrapping
// os.ErrDeadlineExceeded.
//
// net/http lifts the deadline when the body's end is read, to watch for
// the client going away during the answer, so an answer streamed after
// the body is not cut. A request without a body is left alone: its
// deadline is lifted already, and one set now would end that watch (and
// with it an MCP session's GET stream). A writer that cannot set deadlines
// (a test's recorder, a server wrapping w without Unwrap) reads without
// one.
func Bound(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}
