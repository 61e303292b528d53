package events

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/nats-io/nats.go"
)

// TrackViolations is a connect option that keeps, for the connection, the
// permissions violations the NATS server reports on it, so that Client and
// Publisher tell every request and turn refused while it waited
// (ErrRequestRefused, ErrReplyRefused), however many run at once on the
// connection, and end a request or turn whose subject is refused as soon
// as the server reports it (ErrRequestRefused, without waiting out its
// deadline; a refused reply inbox is still told at the deadline). Without
// it they read the connection's LastError once the deadline has passed,
// which holds the last violation only: of several refused requests at
// once, or an inbox refused and then another subject, only the last is
// told and the others show as plain timeouts. FrontendInbox includes it.
//
// It chains the connection's error handler: pass nats.ErrorHandler (if
// any) BEFORE it, e.g.
//
//	nats.Connect(url, nats.ErrorHandler(h), events.TrackViolations())
//
// and h still receives every error, violations included, after they are
// kept. A handler set after it (a later nats.ErrorHandler, or
// nc.SetErrorHandler) replaces it: the connection then falls back to
// LastError. Without a handler of the user's, errors are printed to
// standard error as nats.go's default handler prints them. Violations are
// kept, and the requests refused ended, as nats.go calls the handler, on
// its callback goroutine, in turn with other callbacks: a handler that
// blocks delays them, and a request whose deadline passes first is told a
// plain timeout.
//
// A connection keeps the refusal of its reply inbox, and the publishes
// refused while a request of Client or Publisher waits on it, up to 1024
// subjects (past that, the oldest go: a request waiting for one is told a
// plain timeout), and nothing once none waits; it is forgotten with the
// connection once that is garbage collected.
func TrackViolations() nats.Option {
	return func(o *nats.Options) error {
		next := o.AsyncErrorCB
		o.AsyncErrorCB = func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if nc != nil && errors.Is(err, nats.ErrPermissionViolation) {
				violationsOf(nc, true).add(nc, err)
			}
			if next != nil {
				next(nc, sub, err)
				return
			}
			printAsyncError(nc, sub, err)
		}
		return nil
	}
}

// printAsyncError writes err to standard error as nats.go's default error
// handler, which TrackViolations replaces when no handler was set, does.
func printAsyncError(nc *nats.Conn, sub *nats.Subscription, err error) {
	var cid uint64
	if nc != nil {
		cid, _ = nc.GetClientID()
	}
	if sub != nil {
		fmt.Fprintf(os.Stderr, "%s on connection [%d] for subscription on %q\n", err.Error(), cid, sub.Subject)
		return
	}
	fmt.Fprintf(os.Stderr, "%s on connection [%d]\n", err.Error(), cid)
}

// violationsKept bounds the distinct violations a connection keeps while
// requests wait on it: past it, the oldest reports go, and a request still
// waiting for one of them is told a plain timeout.
const violationsKept = 1024

// violationLog is a connection's permissions violations (TrackViolations),
// kept while a request waits that was sent before them.
type violationLog struct {
	mu sync.Mutex
	// seq counts the violations reported; a request compares the count
	// when it was sent (violationMark) with the reports' numbers.
	seq uint64
	// waiting counts the requests waiting, by seq when each was sent.
	waiting map[uint64]int
	// refusedPublishes holds, by subject, the latest report of each
	// publish refused while a request waited.
	refusedPublishes map[string]violation
	// inbox is the last refusal of a subscription under the connection's
	// inbox prefix, made on the reconnect numbered inboxGen: the reply
	// inbox is subscribed once a connection, so refused once, and kept
	// apart so that it holds for requests sent after it.
	inbox    string
	inboxGen uint64
	// watching holds, by subject, the requests waiting whose context
	// ends as soon as a publish to their subject is reported refused
	// (watchRefusal), each until its mark's done.
	watching map[string]map[*refusalWatch]struct{}
}

// refusalWatch is a request waiting for its reply that a refusal of its
// subject ends at once.
type refusalWatch struct {
	subject string
	cancel  context.CancelCauseFunc
}

// refusal is the cause a request's context ends with when the server
// reports its subject refused while it waits: kind (ErrRequestRefused) in
// the server's words.
type refusal struct {
	kind      error
	violation string
}

func (r *refusal) Error() string { return r.kind.Error() + " (" + r.violation + ")" }
func (r *refusal) Unwrap() error { return r.kind }

// refusedEarly returns the refusal that ended ctx (watchRefusal) when err,
// a request's error, is that end, else nil.
func refusedEarly(ctx context.Context, err error) *refusal {
	var r *refusal
	if !errors.Is(err, context.Canceled) || !errors.As(context.Cause(ctx), &r) {
		return nil
	}
	return r
}

// violation is one violation's words (the server's, without nats.go's
// prefix) and the number of its report.
type violation struct {
	seq uint64
	msg string
}

// violationLogs maps a connection (held weakly, so that a closed
// connection the program dropped is collected) to its violations.
var violationLogs sync.Map // weak.Pointer[nats.Conn] → *violationLog

// violationsOf returns nc's violations, creating them when create is set,
// else nil when none were reported on nc.
func violationsOf(nc *nats.Conn, create bool) *violationLog {
	key := weak.Make(nc)
	if l, ok := violationLogs.Load(key); ok {
		return l.(*violationLog)
	}
	if !create {
		return nil
	}
	l, loaded := violationLogs.LoadOrStore(key, &violationLog{})
	if !loaded {
		runtime.AddCleanup(nc, func(key weak.Pointer[nats.Conn]) { violationLogs.Delete(key) }, key)
	}
	return l.(*violationLog)
}

// violationWords is err's violation in the server's words.
func violationWords(err error) string {
	return strings.TrimPrefix(err.Error(), nats.ErrPermissionViolation.Error()+": ")
}

// inboxSubscription is how the server words the refusal of a subscription
// under nc's inbox prefix, up to the subject's next token.
func inboxSubscription(nc *nats.Conn) string {
	inbox := nc.Opts.InboxPrefix
	if inbox == "" {
		inbox = nats.InboxPrefix
	}
	return `Subscription to "` + strings.TrimSuffix(inbox, ".") + "."
}

// add records the violation err reported on nc.
func (l *violationLog) add(nc *nats.Conn, err error) {
	msg := violationWords(err)
	isInbox := strings.Contains(msg, inboxSubscription(nc))
	var gen uint64
	if isInbox {
		gen = nc.Stats().Reconnects
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if isInbox {
		l.inbox, l.inboxGen = msg, gen
	}
	subject, ok := publishedTo(msg)
	if ok {
		// The requests waiting on subject were sent before this report
		// (watchRefusal registers them before sending): each was refused
		// too, and has nothing more to wait for.
		for w := range l.watching[subject] {
			w.cancel(&refusal{kind: ErrRequestRefused, violation: msg})
		}
	}
	if !ok || len(l.waiting) == 0 {
		return // no request sent before it to tell
	}
	if l.refusedPublishes == nil {
		l.refusedPublishes = make(map[string]violation)
	}
	l.refusedPublishes[subject] = violation{seq: l.seq, msg: msg}
	if len(l.refusedPublishes) <= violationsKept {
		return
	}
	// Those reported before every waiting request was sent are no one's;
	// past that, the older half goes (so that this runs once in
	// violationsKept/2 reports, not at each).
	oldest := l.seq
	for mark := range l.waiting {
		oldest = min(oldest, mark)
	}
	oldest = max(oldest, l.seq-violationsKept/2)
	for subject, v := range l.refusedPublishes {
		if v.seq <= oldest {
			delete(l.refusedPublishes, subject)
		}
	}
}

// publishAfter returns the refusal of a publish to subject reported after
// the report numbered after.
func (l *violationLog) publishAfter(subject string, after uint64) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.refusedPublishes[subject]; ok && v.seq > after {
		return v.msg, true
	}
	return "", false
}

// publishedTo returns the subject of the refused publish the server's
// words msg tell of, if they do.
func publishedTo(msg string) (string, bool) {
	const to = `Publish to "`
	i := strings.LastIndex(msg, to)
	if i < 0 || !strings.HasSuffix(msg, `"`) || len(msg) < i+len(to)+1 {
		return "", false
	}
	return msg[i+len(to) : len(msg)-1], true
}

// inboxRefused returns the refusal of the reply inbox's subscription made
// since the connection last (re)connected: a reconnect subscribes again.
func (l *violationLog) inboxRefused(reconnects uint64) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inbox == "" || l.inboxGen != reconnects {
		return "", false
	}
	return l.inbox, true
}

// violationMark is what a request notes of its connection's violations
// when it is sent, for refused: the last error and how many violations
// were reported. Its done is called once the request has its answer.
type violationMark struct {
	last error
	log  *violationLog
	seq  uint64
	// watch, when set, is the request's entry in log.watching.
	watch *refusalWatch
}

// markViolations notes nc's violations before a request is sent on it, and
// has the violations reported from then on kept until the mark's done.
func markViolations(nc *nats.Conn) violationMark {
	return mark(nc, nil)
}

// watchRefusal is markViolations for a request to subject, which also
// returns a context derived from ctx that ends, with a *refusal cause
// (refusedEarly), as soon as the server reports a publish to subject
// refused on nc: the server dropped the request, and no reply will come.
// Only a connection made with TrackViolations is told of its refusals as
// they come; on another the context ends with ctx. The mark's done
// releases the context: call it once the request has its answer.
func watchRefusal(ctx context.Context, nc *nats.Conn, subject string) (context.Context, violationMark) {
	if nc == nil {
		return ctx, violationMark{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, mark(nc, &refusalWatch{subject: subject, cancel: cancel})
}

// mark is markViolations, registering w (if any) in the same hold of the
// log's lock as the mark's count, so that every report after the mark
// sees it.
func mark(nc *nats.Conn, w *refusalWatch) violationMark {
	if nc == nil {
		return violationMark{}
	}
	m := violationMark{last: nc.LastError(), log: violationsOf(nc, true), watch: w}
	m.log.mu.Lock()
	defer m.log.mu.Unlock()
	m.seq = m.log.seq
	if m.log.waiting == nil {
		m.log.waiting = make(map[uint64]int)
	}
	m.log.waiting[m.seq]++
	if w != nil {
		if m.log.watching == nil {
			m.log.watching = make(map[string]map[*refusalWatch]struct{})
		}
		if m.log.watching[w.subject] == nil {
			m.log.watching[w.subject] = make(map[*refusalWatch]struct{})
		}
		m.log.watching[w.subject][w] = struct{}{}
	}
	return m
}

// done ends the request's wait: the violations reported while no other
// request waits are not kept.
func (m violationMark) done() {
	if m.log == nil {
		return
	}
	m.log.mu.Lock()
	defer m.log.mu.Unlock()
	if m.log.waiting[m.seq]--; m.log.waiting[m.seq] <= 0 {
		delete(m.log.waiting, m.seq)
	}
	if w := m.watch; w != nil {
		if ws := m.log.watching[w.subject]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(m.log.watching, w.subject)
			}
		}
		w.cancel(context.Canceled) // releases the request's context
	}
	if len(m.log.waiting) == 0 {
		clear(m.log.refusedPublishes)
	}
}
