package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// DefaultClientTimeout bounds a client request whose context has no
// deadline, but a forget's.
const DefaultClientTimeout = 5 * time.Second

// DefaultForgetTimeout bounds a Forget whose context has no deadline: the
// service answers once the user's documents and events are deleted too,
// which for a user with many of them takes longer than
// DefaultClientTimeout (docs/protocol.md, "forget").
const DefaultForgetTimeout = 2 * time.Minute

// DefaultExportTimeout is what an export page's work may take at most in
// memoryd (enricher.Config.ExportTimeout) and what `memoryd export` waits
// for a page by default: the first page of a long export reads the whole
// memory and saves a copy of it, seconds for tens of MB.
const DefaultExportTimeout = 2 * time.Minute

// DefaultExportWait is how long a client waits for an export page when its
// context has no deadline: DefaultExportTimeout and 15 s more, so that
// memoryd's own error comes first (before, a library caller gave up on a
// large memory's first page at 5 s while memoryd went on copying it, and
// each retry made another copy).
const DefaultExportWait = DefaultExportTimeout + 15*time.Second

// DefaultLanguageTimeout bounds a language request without a deadline of
// its own: a change re-indexes every item of the user, which memoryd
// allows a minute (about a second for 5,000 items on a quiet server, and
// several times that under load).
const DefaultLanguageTimeout = 2 * time.Minute

// defaultTimeout is how long a request to endpoint waits when its context
// has no deadline.
func defaultTimeout(endpoint string) time.Duration {
	switch endpoint {
	case "forget":
		return DefaultForgetTimeout
	case "language":
		return DefaultLanguageTimeout
	case "export":
		return DefaultExportWait
	}
	return DefaultClientTimeout
}

// requestTimeout is how long a request to endpoint waits when its context
// has no deadline: WithRequestTimeout's, else the endpoint's default.
// Forget and language keep their own unless it is longer: they take
// minutes on a large memory whatever the caller's usual bound. An export
// page waits WithRequestTimeout's whatever it is: bounding each page of a
// paged call is what it is for (memoryd export --timeout 1s waited a
// silent page DefaultExportWait, a review).
func (c *Client) requestTimeout(endpoint string) time.Duration {
	d := defaultTimeout(endpoint)
	if c.timeout > 0 && (d == DefaultClientTimeout || endpoint == "export" || c.timeout > d) {
		return c.timeout
	}
	return d
}

// Client calls a memoryd service over NATS request-reply. It is safe for
// concurrent use. Errors the service replies with are *ServiceError; the
// others are transport errors, told apart with errors.Is:
//
//   - nats.ErrNoResponders: nothing serves the request's subject, whose
//     message names it whole ("no memoryd service is running on
//     memory.enrich.alice"): memoryd is not running, or runs under another
//     prefix than the client's (NewClient).
//   - context.DeadlineExceeded: the request timed out (ctx's deadline, or
//     the endpoint's default when ctx has none); nats.go's request with a
//     context returns no nats.ErrTimeout. memoryd may be slow or down, or
//     the NATS server dropped the request or its reply (below).
//   - ErrRequestRefused: the NATS server refused this connection the
//     request's subject (this credential is not allowed it: sending it
//     again fails again). On a connection made with TrackViolations
//     (FrontendInbox includes it) the request ends as soon as the server
//     reports the refusal, as nats.js's does, and the error does not wrap
//     context.DeadlineExceeded; on another it waits out its deadline, and
//     the timeout's error wraps ErrRequestRefused too when the
//     connection's last error tells (of several refused at once, only the
//     last is).
//   - ErrReplyRefused, with context.DeadlineExceeded: the server refused
//     the subscription of the reply's inbox (connect with FrontendInbox),
//     so the request went out, may have been carried out, and waited out
//     its deadline.
//   - context.Canceled: ctx was canceled; nats.ErrConnectionClosed: the
//     connection was closed.
//
// Both refusals wrap nats.ErrPermissionViolation.
//
// Replies arrive on the connection's inbox. A frontend whose NATS user is
// confined to its own reply subjects (docs/protocol.md) connects with
// FrontendInbox(name), e.g.
//
//	nc, err := nats.Connect(url, nats.UserInfo("alice_frontend", pw),
//		events.FrontendInbox("alice_frontend"))
//
// otherwise its requests wait on "_INBOX.", which it may not subscribe to,
// and time out. See the package's example for a frontend's whole set-up.
type Client struct {
	nc     *nats.Conn
	prefix string
	// timeout, when set, replaces the endpoints' default timeouts
	// (WithRequestTimeout).
	timeout time.Duration
}

// WithRequestTimeout returns a client whose requests each wait at most d
// when their context has no deadline, instead of DefaultClientTimeout
// (forget and language keep their own, longer defaults unless d is
// longer still; an export page waits d, DefaultExportWait without it).
// It is for the
// calls made of several requests (Export, Import, ListFacts), whose number
// grows with the user's memory: a deadline on their context bounds them
// whole, where this bounds each request (a page, a part of the import) and
// lets a large memory take as many as it needs.
func (c *Client) WithRequestTimeout(d time.Duration) *Client {
	cc := *c
	cc.timeout = d
	return &cc
}

// Connected reports whether the client's NATS connection is up (a probe
// of readiness: requests sent now can reach memoryd).
func (c *Client) Connected() bool { return c.nc.IsConnected() }

// Ping makes a round trip to the NATS server (a PING and its PONG), not to
// memoryd, within ctx: an error means the connection, though Connected,
// carries nothing now (a hung server, a lost host, a partition), which
// the connection's own pings find only later.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats server did not answer a ping: %w", err)
	}
	return nil
}

// NewClient returns a client sending under prefix (default "memory" when
// empty).
func NewClient(nc *nats.Conn, prefix string) *Client {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Client{nc: nc, prefix: prefix}
}

// Subject returns the subject of endpoint (e.g. "enrich", "facts.get") for
// userID.
func (c *Client) Subject(endpoint, userID string) string {
	return c.prefix + "." + endpoint + "." + UserToken(userID)
}

// encodeRequest encodes a request without HTML escaping: json.Marshal
// writes "<", ">" and "&" as six bytes each, also inside the raw lines of
// an import, which Import sizes as they are (a line of HTML or code would
// triple and overflow the request limit).
func encodeRequest(req any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// call sends req to endpoint for userID and decodes the reply into reply.
func (c *Client) call(ctx context.Context, endpoint, userID string, req, reply any) error {
	if err := checkText(req); err != nil {
		return fmt.Errorf("memoryd %s: %w", endpoint, err)
	}
	data, err := encodeRequest(req)
	if err != nil {
		return fmt.Errorf("memoryd %s: encode request: %w", endpoint, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.requestTimeout(endpoint))
		defer cancel()
	}
	out := &nats.Msg{Subject: c.Subject(endpoint, userID), Data: data}
	InjectTrace(ctx, out) // memoryd's span for the request joins ctx's trace
	ctx, before := watchRefusal(ctx, c.nc, out.Subject)
	defer before.done()
	msg, err := c.nc.RequestMsgWithContext(ctx, out)
	if err != nil {
		if r := refusedEarly(ctx, err); r != nil {
			// The server refused the subject while the request waited
			// (TrackViolations): no reply will come, so it ends now.
			return fmt.Errorf("memoryd %s: %w", endpoint, r)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// The whole subject, token included: a request on a prefix
			// no memoryd serves, or with a token that is not the user's,
			// gets no responders as well as a memoryd that is down.
			return fmt.Errorf("memoryd %s: no memoryd service is running on %s: %w", endpoint, out.Subject, err)
		}
		if kind, violation := refused(c.nc, out.Subject, before); kind != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			// Not memoryd being slow or down: the server dropped the
			// request, or its reply's subscription.
			return fmt.Errorf("memoryd %s: %w (%s): %w", endpoint, kind, violation, err)
		}
		return fmt.Errorf("memoryd %s: %w", endpoint, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			n = 500
		}
		return &ServiceError{Code: n, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if err := json.Unmarshal(msg.Data, reply); err != nil {
		return fmt.Errorf("memoryd %s: decode reply: %w", endpoint, err)
	}
	return nil
}

// Enrich returns the memory relevant to req.Message. Memory being
// unavailable is not an error (the reply is Degraded); on any error Enrich
// still returns an empty, degraded reply, so a frontend may use the reply and
// log the error. Give ctx the deadline the chat can afford before its model
// call (a few hundred milliseconds): without one the request waits up to
// DefaultClientTimeout.
func (c *Client) Enrich(ctx context.Context, req EnrichRequest) (EnrichReply, error) {
	req.Message = readText(req.Message)
	var reply EnrichReply
	if err := c.call(ctx, "enrich", req.UserID, req, &reply); err != nil {
		return EnrichReply{
			UserID:   req.UserID,
			Facts:    []Fact{},
			Context:  []ContextItem{},
			Keywords: []string{},
			Degraded: true,
			Reason:   err.Error(),
		}, err
	}
	return reply, nil
}

// Search returns the user's context items matching req.Query, best first.
func (c *Client) Search(ctx context.Context, req SearchRequest) (SearchReply, error) {
	req.Query = readText(req.Query)
	var reply SearchReply
	err := c.call(ctx, "search", req.UserID, req, &reply)
	return reply, err
}

// Store remembers a question/answer pair.
func (c *Client) Store(ctx context.Context, req StoreRequest) (StoreReply, error) {
	var reply StoreReply
	err := c.call(ctx, "store", req.UserID, req, &reply)
	return reply, err
}

// Clear forgets the context items req selects and returns how many went.
func (c *Client) Clear(ctx context.Context, req ClearRequest) (int64, error) {
	var reply DeletedReply
	err := c.call(ctx, "clear", req.UserID, req, &reply)
	return reply.Deleted, err
}

// ErrFactNotSet is returned (wrapped) by SetFact when the value was not
// stored because a value from a turn stamped later stays current.
var ErrFactNotSet = errors.New("fact not set")

// SetFact sets a fact and returns the reply, whose Fact is the fact now
// current. When a value from a later turn stays current the reply has OK
// false and the error wraps ErrFactNotSet.
func (c *Client) SetFact(ctx context.Context, userID, key, value string) (SetFactReply, error) {
	var reply SetFactReply
	if err := c.call(ctx, "facts.set", userID, SetFactRequest{UserID: userID, Key: key, Value: value}, &reply); err != nil {
		return reply, err
	}
	if !reply.OK {
		return reply, fmt.Errorf("memoryd facts.set: %w: %s", ErrFactNotSet, reply.Reason)
	}
	return reply, nil
}

// GetFact returns one fact; a missing fact is a *ServiceError with Code 404.
func (c *Client) GetFact(ctx context.Context, userID, key string) (Fact, error) {
	var reply Fact
	err := c.call(ctx, "facts.get", userID, FactRequest{UserID: userID, Key: key}, &reply)
	return reply, err
}

// ClearFact deletes a fact and returns how many went (0 or 1).
func (c *Client) ClearFact(ctx context.Context, userID, key string) (int64, error) {
	var reply DeletedReply
	err := c.call(ctx, "facts.clear", userID, FactRequest{UserID: userID, Key: key}, &reply)
	return reply.Deleted, err
}

// ListFacts returns the user's facts, every page, in the reply's order:
// the latest stated (SourceAt) first, then by key. A page that does not
// continue after its cursor (a memoryd older than paged facts.list answers
// the first page again) is an error, not a list holding facts twice.
func (c *Client) ListFacts(ctx context.Context, userID string) ([]Fact, error) {
	req := FactsListRequest{UserID: userID}
	facts := []Fact{} // an empty list, as the reply's "facts": []
	for {
		var reply FactsReply
		if err := c.call(ctx, "facts.list", userID, req, &reply); err != nil {
			return facts, err
		}
		if req.After != nil {
			for _, f := range reply.Facts {
				if !req.After.before(f.SourceAt, f.Key) {
					return facts, fmt.Errorf("facts.list: the page after %s %q did not continue after it (fact %q): is an older memoryd answering?",
						req.After.SourceAt.Format(time.RFC3339Nano), req.After.Key, f.Key)
				}
			}
			if reply.Next != nil && !req.After.before(reply.Next.SourceAt, reply.Next.Key) {
				return facts, fmt.Errorf("facts.list: the page after %s %q named no later cursor", req.After.SourceAt.Format(time.RFC3339Nano), req.After.Key)
			}
		}
		if facts = append(facts, reply.Facts...); reply.Next == nil {
			return facts, nil
		}
		req.After = reply.Next
	}
}

// Stats returns the user's memory counters.
func (c *Client) Stats(ctx context.Context, userID string) (StatsReply, error) {
	var reply StatsReply
	err := c.call(ctx, "stats", userID, UserRequest{UserID: userID}, &reply)
	return reply, err
}

// Forget deletes everything memoryd keeps about the user, including their
// events in the stream, and returns the counts. Without a deadline in ctx
// it waits up to DefaultForgetTimeout. The frontend credential
// docs/protocol.md describes is not granted forget: with it, Forget fails
// with ErrRequestRefused, at once on a connection made with
// TrackViolations or FrontendInbox (see Client).
func (c *Client) Forget(ctx context.Context, userID string) (ForgetReply, error) {
	var reply ForgetReply
	err := c.call(ctx, "forget", userID, UserRequest{UserID: userID}, &reply)
	return reply, err
}

// ---- Issue 16 item 7: managing context items by id (memory.context.*) ----

// ListContext returns one page of the user's context items, newest first;
// pass the reply's NextCursor in req.Cursor for the next page.
func (c *Client) ListContext(ctx context.Context, req ContextListRequest) (ContextListReply, error) {
	var reply ContextListReply
	err := c.call(ctx, "context.list", req.UserID, req, &reply)
	return reply, err
}

// GetContext returns one context item; an id the user has no item with is a
// *ServiceError with Code 404.
func (c *Client) GetContext(ctx context.Context, userID string, id int64) (ContextItem, error) {
	var reply ContextItem
	err := c.call(ctx, "context.get", userID, ContextItemRequest{UserID: userID, ID: id}, &reply)
	return reply, err
}

// UpdateContext replaces an item's question and/or answer and returns the
// item as updated. A missing item is a *ServiceError with Code 404; a pair
// another item of the user already holds is Code 409, and nothing changes.
func (c *Client) UpdateContext(ctx context.Context, req ContextUpdateRequest) (ContextItem, error) {
	var reply ContextItem
	err := c.call(ctx, "context.update", req.UserID, req, &reply)
	return reply, err
}

// DeleteContext deletes one context item; a missing item is a *ServiceError
// with Code 404.
func (c *Client) DeleteContext(ctx context.Context, userID string, id int64) error {
	var reply DeletedReply
	return c.call(ctx, "context.delete", userID, ContextItemRequest{UserID: userID, ID: id}, &reply)
}

// FactHistory returns a page of one fact's changes, newest first; pass the
// reply's NextBefore as req.Before for the next page. A key never set has no
// changes (not an error).
func (c *Client) FactHistory(ctx context.Context, req FactHistoryRequest) (FactHistoryReply, error) {
	var reply FactHistoryReply
	err := c.call(ctx, "facts.history", req.UserID, req, &reply)
	return reply, err
}

// Language returns the user's language (memory.language).
func (c *Client) Language(ctx context.Context, userID string) (LanguageReply, error) {
	var reply LanguageReply
	err := c.call(ctx, "language", userID, LanguageRequest{UserID: userID}, &reply)
	return reply, err
}

// SetLanguage sets the user's language and re-indexes their context items
// under its text search configuration; a language memoryd does not accept
// is a *ServiceError with Code 400. Setting the language the user already
// has is cheap.
func (c *Client) SetLanguage(ctx context.Context, userID, language string) (LanguageReply, error) {
	var reply LanguageReply
	err := c.call(ctx, "language", userID, LanguageRequest{UserID: userID, Language: language}, &reply)
	return reply, err
}
