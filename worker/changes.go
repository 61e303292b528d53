package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// msgListenFailed is logged each time listening for committed changes
// fails, every few seconds while Postgres is down.
const msgListenFailed = "changes: listen"

// OutageRepeats are the warnings and errors the worker logs again and
// again while a dependency is down (these do not back off far, or are
// logged once per job, and every turn is a job with a model; the ingest's
// every 5 s): a process's log handler may hold back repeats of them.
var OutageRepeats = []string{msgListenFailed, msgPublishFailed, msgModelUnreachable, msgModelUnreachableAttempts, msgModelRefuses, msgModelRefusesAttempts, msgDBUnreachable, msgDBDiskFull, msgDBReadOnly, msgEmbedWaiting, msgEmbedRefuses, msgIngestFailing}

// msgPublishFailed is logged when a round of the changes publisher fails.
// Its backoff starts again after a round that sent something, so with
// Postgres short of connections (rounds failing and passing in turn) it
// was a line a second (a Postgres walk: 68 in 60 s): held back with the
// other outage lines.
const msgPublishFailed = "changes: publish failed, retrying"

// ChangesConfig configures a Changes publisher.
type ChangesConfig struct {
	// Conn publishes the changes. Required.
	Conn *nats.Conn
	// Store holds the outbox the changes are read from. Required.
	Store *store.Store
	// Prefix is the subject prefix. Default events.DefaultPrefix.
	Prefix string
	// Logger receives the publisher's logs. Default slog.Default().
	Logger *slog.Logger
	// PollInterval is how long the publisher waits for a commit's
	// notification before it looks at the outbox anyway (a notification
	// lost with its connection, another process that gave up). Default 5s.
	PollInterval time.Duration
	// BatchSize is how many of one user's changes one transaction sends
	// (and deletes). Default 200.
	BatchSize int
	// Users is how many users one page of a round reads (a round visits
	// every user with changes waiting, page by page). Default 100.
	Users int
	// FlushTimeout bounds the wait for the NATS server to confirm it
	// received a batch (a PING's PONG) before the batch is deleted from
	// the outbox. Default 5s.
	FlushTimeout time.Duration
	// RetryMin and RetryMax bound the backoff after a failed round (NATS or
	// Postgres unreachable): it doubles from RetryMin up to RetryMax and
	// starts again after a round that succeeds. Defaults 100ms and 30s.
	RetryMin, RetryMax time.Duration
	// MaxAge is how long a change may wait unsent (NATS unreachable)
	// before it is dropped, so that the outbox cannot grow without bound;
	// a subscriber sees the gap in seq and re-reads. Negative: never
	// dropped. Default 24h.
	MaxAge time.Duration
}

func (c ChangesConfig) withDefaults() ChangesConfig {
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PollInterval == 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 200
	}
	if c.Users == 0 {
		c.Users = 100
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = 5 * time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.MaxAge == 0 {
		c.MaxAge = 24 * time.Hour
	}
	return c
}

func (c ChangesConfig) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("changes: ChangesConfig.Conn is required")
	case c.Store == nil:
		return errors.New("changes: ChangesConfig.Store is required")
	case c.PollInterval < 0:
		return errors.New("changes: ChangesConfig.PollInterval must not be negative")
	case c.BatchSize < 1:
		return errors.New("changes: ChangesConfig.BatchSize must be at least 1")
	case c.Users < 1:
		return errors.New("changes: ChangesConfig.Users must be at least 1")
	case c.FlushTimeout < 0:
		return errors.New("changes: ChangesConfig.FlushTimeout must not be negative")
	case c.RetryMin < 0 || c.RetryMax < c.RetryMin:
		return errors.New("changes: ChangesConfig.RetryMax must be at least RetryMin, both not negative")
	}
	return nil
}

// Changes publishes the committed changes of users' memory (the store's
// outbox, written in the transactions that make them) on
// <prefix>.changes.<token>, each user's in seq order (commit order), and
// deletes them once the NATS server has them. It wakes on the commits'
// notifications (LISTEN), on this process's commits (Committed), and every
// PollInterval without either. Any number
// of processes may run one on the same database: a user's changes are sent
// by one at a time (see store.SendChanges). Delivery is at least once: a
// batch whose deletion fails after the server had it is sent again.
//
// While Conn is not connected it publishes nothing: it waits for the
// reconnect (rounds every PollInterval still drop what passed MaxAge)
// rather than fill the connection's reconnect buffer, which the process's
// other publishers (enrich replies) share, with batches it would send
// again anyway. A batch the connection lost mid-way is sent again after
// the reconnect.
type Changes struct {
	cfg ChangesConfig
	// wake holds one pending wake-up of the run loop: a commit told by
	// Committed, or the listener's notification.
	wake chan struct{}

	published, dropped, failures, waits atomic.Int64

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// ChangesStats are a publisher's counters since it was built.
type ChangesStats struct {
	// Published counts changes NATS confirmed.
	Published int64
	// Dropped counts changes deleted unsent: after MaxAge, or that could
	// not be published at all (too large even without their text).
	Dropped int64
	// Failures counts rounds that failed (and were retried): rounds that
	// sent nothing while some user's batch failed.
	Failures int64
	// Waits counts rounds put off because NATS was not connected (the
	// publisher then waits for the reconnect).
	Waits int64
}

// NewChanges validates cfg and builds a publisher; it touches nothing.
func NewChanges(cfg ChangesConfig) (*Changes, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Changes{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// ownCtx marks the contexts of the publisher's own statements, so that
// their commits (which only delete what was sent) do not wake it again.
type ownCtx struct{}

// Committed tells the publisher that a transaction of this process ended,
// possibly with memory changes (store.Config.Committed): it runs a round
// soon, without waiting for a notification. A process whose connections do
// not notify (store.Config.QuietChanges) must call it after its commits.
// Commits of the publisher's own are ignored. It never blocks; wake-ups
// while a round runs are one more round.
func (c *Changes) Committed(ctx context.Context) {
	if ctx.Value(ownCtx{}) != nil {
		return
	}
	c.kick()
}

func (c *Changes) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Start starts publishing, in a goroutine that runs until Stop.
func (c *Changes) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return errors.New("changes: already started")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(runCtx, c.done)
	return nil
}

// Stop stops publishing and waits for the goroutine to end: until ctx
// ends, then for at most changesStopGrace more. Everything the goroutine
// does is bound to the context Stop cancels, so it ends within moments; a
// shutdown whose deadline the jobs' hand-back used up (ctx already done)
// must not report that as a failed stop. A batch being sent is rolled back
// and sent again by the next publisher.
func (c *Changes) Stop(ctx context.Context) error {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	grace := time.NewTimer(changesStopGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
		return fmt.Errorf("changes: stop: %w", ctx.Err())
	}
}

// changesStopGrace is how long Stop waits past its context for the
// publisher, cancelled, to end.
const changesStopGrace = 5 * time.Second

// Stats returns the publisher's counters.
func (c *Changes) Stats() ChangesStats {
	return ChangesStats{Published: c.published.Load(), Dropped: c.dropped.Load(), Failures: c.failures.Load(), Waits: c.waits.Load()}
}

// errDisconnected: NATS is not connected; the round is put off.
var errDisconnected = errors.New("nats not connected")

// run publishes until ctx ends: a round, then a wait for a wake-up (a
// commit of this process, a notification) or PollInterval, or after a
// failed round for the backoff, or while NATS is not connected for the
// reconnect.
func (c *Changes) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	ctx = context.WithValue(ctx, ownCtx{}, true)
	var (
		fails   int
		waiting bool // since the last round that was not put off
	)
	// Registered before the first round: a reconnect after a round found
	// NATS down is in the channel (it buffers 10; one is enough to wake).
	connected := c.cfg.Conn.StatusChanged(nats.CONNECTED)
	defer c.cfg.Conn.RemoveStatusListener(connected)
	// Listening before the first round: a commit after this is noticed
	// even when the round misses it. The listener's goroutine turns
	// notifications into wake-ups and listens again when its connection
	// fails; it ends with ctx, before run returns.
	l, err := c.cfg.Store.ListenChanges(ctx)
	if err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn(msgListenFailed, "error", err)
	}
	listening := make(chan struct{})
	go c.listen(ctx, l, listening)
	defer func() { <-listening }()
	for ctx.Err() == nil {
		if err := c.round(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errDisconnected) {
				c.waits.Add(1)
				if !waiting { // once an outage, not every PollInterval
					c.cfg.Logger.Info("changes: nats not connected, waiting for the reconnect")
					waiting = true
				}
				c.waitConnected(ctx, connected)
				continue
			}
			fails++
			c.failures.Add(1)
			wait := min(c.cfg.RetryMin<<min(fails-1, 20), c.cfg.RetryMax)
			c.cfg.Logger.Warn(msgPublishFailed, "error", err, "retry_in", wait)
			sleep(ctx, wait)
			continue
		}
		fails, waiting = 0, false
		t := time.NewTimer(c.cfg.PollInterval)
		select {
		case <-c.wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// listen turns the commits' notifications into wake-ups until ctx ends,
// then closes the listener; l may be nil (listening failed at start), and
// a listener whose connection fails is replaced, one attempt every
// PollInterval. A new listener wakes the loop once: what committed while
// nobody listened is then seen.
func (c *Changes) listen(ctx context.Context, l *store.ChangeListener, done chan struct{}) {
	defer close(done)
	defer func() {
		if l != nil {
			l.Close()
		}
	}()
	for ctx.Err() == nil {
		if l == nil {
			sleep(ctx, c.cfg.PollInterval)
			var err error
			if l, err = c.cfg.Store.ListenChanges(ctx); err != nil {
				if ctx.Err() == nil {
					c.cfg.Logger.Warn(msgListenFailed, "error", err)
				}
				continue
			}
			c.kick()
		}
		wctx, cancel := context.WithTimeout(ctx, c.cfg.PollInterval)
		err := l.Wait(wctx)
		cancel()
		switch {
		case err == nil:
			c.kick()
		case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		default:
			// The listening connection failed: listen again.
			c.cfg.Logger.Warn(msgListenFailed, "error", err)
			l.Close()
			l = nil
		}
	}
}

// waitConnected returns once Conn is connected, after PollInterval (so
// that a round drops what passed MaxAge), or when ctx ends.
func (c *Changes) waitConnected(ctx context.Context, connected <-chan nats.Status) {
	t := time.NewTimer(c.cfg.PollInterval)
	defer t.Stop()
	for !c.cfg.Conn.IsConnected() {
		select {
		case <-connected:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// round drops what waited past MaxAge, then publishes the outbox until it
// is empty, or holds only users another process is sending.
func (c *Changes) round(ctx context.Context) error {
	if c.cfg.MaxAge > 0 {
		n, err := c.cfg.Store.DropChanges(ctx, c.cfg.Store.Clock().Now().Add(-c.cfg.MaxAge))
		if err != nil {
			return err
		}
		if n > 0 {
			c.dropped.Add(n)
			c.cfg.Logger.Warn("changes: dropped changes never published", "changes", n, "max_age", c.cfg.MaxAge)
		}
	}
	if !c.cfg.Conn.IsConnected() {
		return errDisconnected
	}
	// A user whose batch fails is logged and left for the next round; the
	// others go on. The round fails (and backs off) only when nothing was
	// sent and some user failed (NATS unreachable, say). The users are
	// visited in passes, a page of Users at a time in user id order, each
	// user one batch per pass, until a pass sends nothing.
	var (
		failed   = map[string]bool{}
		sentUpTo = map[string]int64{} // the last seq sent of each user
		firstErr error
		anySent  bool
		after    string
		passSent int
	)
	for {
		users, err := c.cfg.Store.ChangeUsers(ctx, after, c.cfg.Users)
		if err != nil {
			return err
		}
		for _, u := range users {
			if failed[u] {
				continue
			}
			var last int64
			n, err := c.cfg.Store.SendChanges(ctx, u, sentUpTo[u], c.cfg.BatchSize, func(chs []store.Change) error {
				if err := c.publish(chs); err != nil {
					return err
				}
				last = chs[len(chs)-1].Seq
				return nil
			})
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, errDisconnected) {
					return err
				}
				failed[u] = true
				if firstErr == nil {
					firstErr = err
				}
				c.cfg.Logger.Warn("changes: publishing a user's changes failed, retrying next round", "error", err)
				continue
			}
			if n > 0 {
				// seq never goes back: the next batch starts after it.
				sentUpTo[u] = last
			}
			passSent += n
		}
		if len(users) == c.cfg.Users {
			after = users[len(users)-1]
			continue
		}
		// The pass is over.
		if passSent == 0 {
			if anySent {
				return nil
			}
			return firstErr
		}
		anySent, after, passSent = true, "", 0
	}
}

// publish sends one user's changes in order and returns once the server
// confirmed them (a flush), so that they are deleted only then. A change
// that cannot be sent at all (not decodable, too large even without its
// text) is skipped: it is deleted with the batch, counted as dropped and
// logged without its text; subscribers see the gap in seq.
func (c *Changes) publish(changes []store.Change) error {
	// Not into the reconnect buffer (see Changes).
	if !c.cfg.Conn.IsConnected() {
		return errDisconnected
	}
	sent := 0
	for _, ch := range changes {
		data, err := c.encode(ch)
		if err != nil {
			c.dropped.Add(1)
			c.cfg.Logger.Warn("changes: change dropped, it cannot be published", "change", ch.ID, "seq", ch.Seq, "error", err)
			continue
		}
		if err := c.cfg.Conn.Publish(events.ChangesSubject(c.cfg.Prefix, ch.UserID), data); err != nil {
			return fmt.Errorf("publish change: %w", err)
		}
		sent++
	}
	if err := c.cfg.Conn.FlushTimeout(c.cfg.FlushTimeout); err != nil {
		return fmt.Errorf("publish changes: flush: %w", err)
	}
	c.published.Add(int64(sent))
	return nil
}

// errTooLarge: a change exceeds the server's max_payload even without its
// text.
var errTooLarge = errors.New("too large for the NATS server even without its text")

// encode builds the message of ch. When it would exceed what the server
// takes in one message, every text field (question, answer, value,
// old_value) goes and truncated is set, rather than holding up the user's
// changes: facts.get and context.get read them.
func (c *Changes) encode(ch store.Change) ([]byte, error) {
	var m events.Change
	if err := json.Unmarshal(ch.Payload, &m); err != nil {
		return nil, err
	}
	m.UserID, m.Seq, m.At = ch.UserID, ch.Seq, ch.At.UTC()
	data, err := marshalChange(m)
	if err != nil {
		return nil, err
	}
	max := c.cfg.Conn.MaxPayload()
	if int64(len(data)) <= max {
		return data, nil
	}
	m.Question, m.Answer, m.Value, m.OldValue, m.Truncated = "", "", "", "", true
	if data, err = marshalChange(m); err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%d bytes: %w", len(data), errTooLarge)
	}
	return data, nil
}

// marshalChange is json.Marshal without escaping <, > and & (which would
// make a text up to six times longer).
func marshalChange(m events.Change) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
