package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/authchallenge"
)

// apiError is OpenAI's error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var e apiError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the messages name `<key>`, read by people
	_ = enc.Encode(e)
}

// user returns who the request is from: the trusted header when configured
// and present, otherwise the user of the bearer key. The body is never
// consulted.
func (p *Proxy) user(r *http.Request) (string, bool) {
	if h := p.cfg.TrustedUserHeader; h != "" {
		if u := strings.TrimSpace(r.Header.Get(h)); u != "" {
			return u, true
		}
	}
	if p.cfg.Keys == nil {
		return "", false
	}
	auth := r.Header.Get("Authorization")
	// The scheme is case-insensitive (RFC 9110).
	if len(auth) < len("Bearer ") || !strings.EqualFold(auth[:len("Bearer ")], "Bearer ") {
		return "", false
	}
	return p.cfg.Keys.Lookup(strings.TrimSpace(auth[len("Bearer "):]))
}

// repeatedUserHeader refuses, with a 400, a request carrying the trusted
// header more than once, or once with a comma (how a proxy joins a header
// sent twice): user reads the first, which a gateway that adds its header
// rather than replacing the client's (Envoy's request_headers_to_add
// appends by default) leaves as the client's own.
func (p *Proxy) repeatedUserHeader(w http.ResponseWriter, r *http.Request) bool {
	h := p.cfg.TrustedUserHeader
	if h == "" {
		return false
	}
	vs := r.Header.Values(h)
	switch {
	case len(vs) > 1:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_user",
			fmt.Sprintf("the %s header was sent %d times: the gateway must replace the client's, not add its own", h, len(vs)))
	case len(vs) == 1 && strings.Contains(vs[0], ","):
		// One line of several values ("client, gateway"), as a proxy
		// may join a header sent twice (RFC 9110).
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_user",
			fmt.Sprintf("the %s header holds a comma: it is one user id, and a comma is how a proxy joins a header sent twice (the gateway must replace the client's)", h))
	default:
		return false
	}
	return true
}

// unauthorized answers r 401 in OpenAI's error shape, with the
// WWW-Authenticate challenge RFC 9110 requires of a 401 (OpenAI's SDKs
// read only the status and the body).
func (p *Proxy) unauthorized(w http.ResponseWriter, r *http.Request) {
	msg := "Incorrect or missing API key: send a memoryd proxy key as 'Authorization: Bearer <key>' (memoryd keys add creates one)."
	challenge := authchallenge.Bearer(Realm, r)
	if p.cfg.Keys == nil {
		// Behind a gateway, with no keys: the gateway's header is missing.
		// No token was looked at, so none is called invalid; the client's
		// own credential is the gateway's business.
		msg = fmt.Sprintf("Missing user: this proxy takes the user from the %s header, which the gateway in front sets.", p.cfg.TrustedUserHeader)
		challenge = `Bearer realm="` + Realm + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", msg)
}

// models passes GET /v1/models (and /v1/models/{id}) through.
func (p *Proxy) models(w http.ResponseWriter, r *http.Request) {
	outcome := p.serveModels(w, r)
	p.obs.Request("models", outcome)
	abortIfCut(r, outcome)
}

// abortIfCut aborts the client's response when the upstream's body broke
// off after its status was relayed: ending the response normally would
// hand the client a truncated reply (a stream without its end) as whole.
func abortIfCut(r *http.Request, outcome string) {
	if (outcome == OutcomeCut || outcome == OutcomeUpstreamStalled) && r.Context().Err() == nil {
		panic(http.ErrAbortHandler)
	}
}

// errStalled is the cause of an upstream request cancelled because its
// body sent nothing for Config.UpstreamIdle.
var errStalled = errors.New("the upstream sent nothing within the idle limit (--upstream-idle)")

// idleWatch bounds the waits for an upstream's response body: a request
// made with its ctx is cancelled (cause errStalled) when the body, once
// watched, goes UpstreamIdle without a byte.
type idleWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	timer  *time.Timer
}

func (p *Proxy) watchIdle(r *http.Request) *idleWatch {
	ctx, cancel := context.WithCancelCause(r.Context())
	return &idleWatch{ctx: ctx, cancel: cancel, idle: p.cfg.UpstreamIdle}
}

// body returns b, each of whose reads may wait at most the idle limit.
// Only the reads count: the time the relay spends writing to a slow client
// between them is not the upstream's.
func (w *idleWatch) body(b io.Reader) io.Reader {
	w.timer = time.AfterFunc(w.idle, func() { w.cancel(errStalled) })
	w.timer.Stop()
	return &idleReader{r: b, w: w}
}

// stop ends the watch and the upstream request's context.
func (w *idleWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel(nil)
}

// outcome is OutcomeUpstreamStalled when the limit cut the body, else
// outcome.
func (w *idleWatch) outcome(outcome string) string {
	if errors.Is(context.Cause(w.ctx), errStalled) {
		return OutcomeUpstreamStalled
	}
	return outcome
}

type idleReader struct {
	r io.Reader
	w *idleWatch
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.w.timer.Reset(r.w.idle)
	n, err := r.r.Read(b)
	r.w.timer.Stop()
	return n, err
}

// serveModels serves models and returns the request's outcome.
func (p *Proxy) serveModels(w http.ResponseWriter, r *http.Request) string {
	if p.repeatedUserHeader(w, r) {
		return OutcomeBadRequest
	}
	if _, ok := p.user(r); !ok {
		p.unauthorized(w, r)
		return OutcomeUnauthorized
	}
	// The model id goes upstream as one path of plain segments: a "." or
	// ".." (sent as such or as %2E, %2F) would let the upstream's path
	// normalisation reach any of its GET endpoints with the upstream key.
	path := "/models"
	if id := r.PathValue("model"); id != "" {
		segs := strings.Split(id, "/")
		for i, s := range segs {
			if s == "" || s == "." || s == ".." {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_model", fmt.Sprintf("%q is not a model id", id))
				return OutcomeBadRequest
			}
			segs[i] = url.PathEscape(s)
		}
		path += "/" + strings.Join(segs, "/")
	}
	watch := p.watchIdle(r)
	defer watch.stop()
	req, err := http.NewRequestWithContext(watch.ctx, http.MethodGet, p.upstreamURL(path), nil)
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_unreachable", err.Error())
		return OutcomeUpstreamUnreachable
	}
	resp, outcome := p.forward(w, r, req)
	if resp == nil {
		return outcome
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, watch.body(resp.Body)); err != nil {
		return watch.outcome(OutcomeCut)
	}
	return outcome
}

// hopHeaders are not forwarded in either direction: connection-level, the
// body's length and encoding (the transport decodes), and the client's
// credentials and memoryd's own headers.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Content-Encoding": true, "Accept-Encoding": true,
	"Authorization": true, MemoryHeader: true, ConversationHeader: true,
	// Other credentials and account selectors a client may send: the
	// upstream is reached with the operator's key, so a user must not
	// choose which of its organisations or projects pays (nor pass on
	// its own cookies or keys).
	"Cookie": true, "Api-Key": true, "X-Api-Key": true, "Openai-Organization": true, "Openai-Project": true,
}

// copyHeaders adds src's headers to dst but for hopHeaders and those src's
// Connection header names (they are its connection's alone: RFC 9110,
// 7.6.1).
func copyHeaders(dst, src http.Header) {
	var named map[string]bool
	for _, v := range src.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	for k, vs := range src {
		if ck := http.CanonicalHeaderKey(k); hopHeaders[ck] || named[ck] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// forward sends req upstream with the client's headers (less credentials)
// and the upstream's own key. On a transport error it writes a 502, or a
// 504 on a timeout, and returns false.
func (p *Proxy) forward(w http.ResponseWriter, in *http.Request, req *http.Request) (*http.Response, string) {
	copyHeaders(req.Header, in.Header)
	if h := p.cfg.TrustedUserHeader; h != "" {
		req.Header.Del(h)
	}
	if h := p.cfg.UpstreamKeyHeader; h != "" {
		// The client's own, even with no key to put in its place.
		req.Header.Del(h)
	}
	key := p.keyFile.ValueOr(p.cfg.UpstreamKey)
	switch {
	case key == "":
	case p.cfg.UpstreamKeyHeader != "":
		req.Header.Set(p.cfg.UpstreamKeyHeader, key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if p.tracer != nil {
		// The proxy's span, in place of the one the client sent.
		traceContext.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		p.obs.Upstream(time.Since(start), "error")
		if in.Context().Err() != nil {
			return nil, OutcomeCut // the client went away
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			p.log.Warn(msgUpstreamTimeout, "timeout", p.cfg.UpstreamTimeout)
			writeError(w, http.StatusGatewayTimeout, "upstream_error", "upstream_timeout", "the upstream model server did not answer in time")
			return nil, OutcomeUpstreamTimeout
		}
		p.log.Warn(msgUpstreamFailed, "error", upstreamError(err))
		// Said as it was: a server that took the connection and closed
		// it unanswered (crashed, or a gateway's limit) was reached. Only
		// such a close: a TLS handshake refused (a certificate, an https
		// URL to a plain-HTTP port) is the URL's or the certificate's.
		msg := "the upstream model server could not be reached"
		if oe := (*net.OpError)(nil); !(errors.As(err, &oe) && oe.Op == "dial") &&
			(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
			msg = "the upstream model server closed the connection without answering"
		}
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_unreachable", msg)
		return nil, OutcomeUpstreamUnreachable
	}
	p.obs.Upstream(time.Since(start), fmt.Sprintf("%dxx", resp.StatusCode/100))
	if resp.StatusCode == http.StatusUnauthorized {
		// The proxy's own key (or its lack: --upstream-key unset) was
		// refused, never the client's, which is not forwarded: relayed,
		// the 401 would have the chat app blame its user's memoryd key,
		// and its message (OpenAI quotes the key's start) reach every user.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		p.log.Error("the upstream refused the proxy's upstream key (HTTP 401): check --upstream-key, or write the new key to --upstream-key-file (read again without a restart)",
			"from_file", p.keyFile != nil)
		// OpenAI's SDKs retry a 5xx twice unless told not to: a refused
		// key fails the same way each time, and each try is logged.
		w.Header().Set("X-Should-Retry", "false")
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_auth_failed",
			"the upstream model server refused the proxy's own key; your memoryd key was accepted (the operator must fix the proxy's upstream key)")
		return nil, OutcomeUpstreamStatus
	}
	if resp.StatusCode/100 != 2 {
		return resp, OutcomeUpstreamStatus
	}
	return resp, OutcomeOK
}

// upstreamError is err, a transport error of a request to the upstream,
// fit for the log: net/http's error quotes the whole URL, whose query
// (--upstream's, kept after each path) may hold a secret (?api-key=,
// ?sig=); it is shown as "?...", and a password as net/http hides it.
func upstreamError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	shown, ok := shownURL(ue.URL)
	if !ok {
		return fmt.Errorf("%s (unparsable URL): %w", ue.Op, ue.Err)
	}
	return fmt.Errorf("%s %q: %w", ue.Op, shown, ue.Err)
}

// shownURL is an upstream URL fit for the log: its query as "?..." and its
// password hidden. ok is false when it does not parse.
func shownURL(raw string) (shown string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "", false
		return u.Redacted() + "?...", true
	}
	return u.Redacted(), true
}

// logNotFound logs the upstream's 404 to user's chat request, which the
// client gets as it came (Ollama's is "404 page not found"): the operator
// is told the URL asked and the model, the two things such a 404 is
// about, and whose app asked (a model one app names that the server
// lacks).
func (p *Proxy) logNotFound(user, url string, rq *request) {
	var model string
	_ = json.Unmarshal(rq.fields["model"], &model)
	shown, _ := shownURL(url)
	p.log.Warn(msgUpstreamNotFound, "user_id", user, "url", shown, "model", firstBytes(model, 200))
}

// request is a chat completion request as far as the proxy reads it; every
// other field stays as the client sent it.
type request struct {
	fields   map[string]json.RawMessage
	messages []json.RawMessage
	// last is the index in messages of the last user message, -1 if none.
	last int
	// text is the last user message's text (its text parts joined), as
	// enrich reads it and the turn holds it: each NUL a space (noNUL), and
	// no white space at its end, which the turn's last bytes would keep
	// instead of the words (a message of 64 KiB of trailing spaces was
	// published blank, and refused).
	text   string
	stream bool
	memory bool
}

// topLevelTwice reports whether the JSON object body holds key more than
// once at its top level. Read only when the key's text occurs twice: a
// second pass over a large body is the exception.
func topLevelTwice(body []byte, key string) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if k, _ := t.(string); k == key {
			if seen {
				return true
			}
			seen = true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// parseRequest reads what the proxy needs from body.
func parseRequest(body []byte) (*request, error) {
	rq := &request{last: -1, memory: true}
	if err := json.Unmarshal(body, &rq.fields); err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	// null is absent, as everywhere in the protocol: it left on false,
	// and the request was neither enriched nor remembered.
	if _, has := rq.fields["memory"]; has && (bytes.Count(body, []byte(`"memory"`)) > 1 || bytes.Contains(body, []byte(`\u`))) &&
		topLevelTwice(body, "memory") {
		// The decoder keeps the last: {"memory":false,"memory":true} was
		// remembered, by a client that saw its opt-out (a security walk).
		// A key may escape its letters ("memor\u0079" is "memory" to the
		// decoder), so a body holding a \u escape is read too, not only
		// one spelling the key twice; only bodies with the field pay.
		return nil, errors.New(`"memory" is given twice`)
	}
	if raw, ok := rq.fields["memory"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		var on bool
		if err := json.Unmarshal(raw, &on); err != nil {
			return nil, errors.New(`"memory" must be true or false`)
		}
		rq.memory = on
	}
	if raw, ok := rq.fields["stream"]; ok {
		_ = json.Unmarshal(raw, &rq.stream) // a non-bool is the upstream's to reject
	}
	raw, ok := rq.fields["messages"]
	if !ok {
		return rq, nil // the upstream answers the missing field
	}
	if err := json.Unmarshal(raw, &rq.messages); err != nil {
		return nil, fmt.Errorf(`"messages" is not an array: %w`, err)
	}
	for i := len(rq.messages) - 1; i >= 0; i-- {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(rq.messages[i], &m); err != nil {
			return nil, fmt.Errorf("messages[%d] is not an object: %w", i, err)
		}
		if m.Role != "user" {
			continue
		}
		rq.last = i
		rq.text = strings.TrimRightFunc(noNUL(contentText(m.Content)), unicode.IsSpace)
		break
	}
	return rq, nil
}

// hasText reports whether the last user message holds more than white
// space: one that does not is neither enriched nor a turn (the publish
// would refuse it, counted a failed publish, the alert operators watch).
func (rq *request) hasText() bool { return rq.text != "" }

// contentText is the text of a message's content: the string, or the text
// parts of an array of parts joined by newlines.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, pt := range parts {
		if pt.Type == "text" && pt.Text != "" {
			texts = append(texts, pt.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// inject returns the last user message with injection appended to its
// content: after a blank line for a string, as one more text part for an
// array of parts. The message's other fields are kept.
func inject(msg json.RawMessage, injection string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	var s string
	var content any
	if err := json.Unmarshal(m["content"], &s); err == nil {
		content = s + "\n\n" + injection
	} else {
		var parts []json.RawMessage
		if err := json.Unmarshal(m["content"], &parts); err != nil {
			return nil, fmt.Errorf("content is neither a string nor an array of parts")
		}
		part, _ := marshal(map[string]string{"type": "text", "text": injection})
		content = append(parts, part)
	}
	c, err := marshal(content)
	if err != nil {
		return nil, err
	}
	m["content"] = c
	return marshal(m)
}

// marshal encodes v without json.Marshal's HTML escaping, so that the
// messages the proxy re-encodes keep the client's "<", ">" and "&" as they
// were.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// body is the request to forward: memoryd's "memory" field removed and,
// when injection is not empty, the last user message enriched; every other
// byte of the messages as the client sent them.
func (rq *request) body(injection string) ([]byte, error) {
	delete(rq.fields, "memory")
	if injection != "" && rq.last >= 0 {
		msgs := append([]json.RawMessage(nil), rq.messages...)
		m, err := inject(msgs[rq.last], injection)
		if err != nil {
			return nil, err
		}
		msgs[rq.last] = m
		raw, err := marshal(msgs)
		if err != nil {
			return nil, err
		}
		rq.fields["messages"] = raw
	}
	return marshal(rq.fields)
}

// enrich returns the injection for the user's last message, or "" when
// memory has nothing, is off, or did not answer within the budget (the
// request then goes unenriched: memory never breaks chat).
func (p *Proxy) enrich(ctx context.Context, user string, rq *request) string {
	start := time.Now()
	injection, outcome := p.enrichOutcome(ctx, user, rq)
	p.obs.Enriched(outcome, time.Since(start))
	return injection
}

// enrichOutcome is enrich's injection and its outcome for the Observer.
func (p *Proxy) enrichOutcome(ctx context.Context, user string, rq *request) (string, string) {
	if !rq.memory || !rq.hasText() {
		return "", EnrichOutcomeSkipped
	}
	// Every round of a tool-call loop is enriched anew, though the same
	// message then changes under the model when memory changed between
	// rounds (the model server's prefix cache misses): a forget or a
	// clear between rounds must reach the next one (a review found a kept
	// injection re-sending forgotten memory).
	ctx, cancel := context.WithTimeout(ctx, p.cfg.EnrichBudget)
	defer cancel()
	// The end of a long message is the question.
	reply, err := p.memory.Enrich(ctx, events.EnrichRequest{UserID: user, Message: lastBytes(rq.text, events.MaxMessageBytes), Format: p.cfg.EnrichFormat})
	switch {
	case err != nil:
		p.log.Warn(msgEnrichFailed, "user_id", user, "error", err)
		return "", EnrichOutcomeFailed
	case reply.Degraded:
		p.log.Warn(msgEnrichDegraded, "user_id", user, "reason", reply.Reason)
		return "", EnrichOutcomeDegraded
	case reply.Injection == "":
		return "", EnrichOutcomeEmpty
	}
	return reply.Injection, EnrichOutcomeEnriched
}

// lastBytes returns the end of s in at most n bytes, starting on a rune
// boundary: a cut inside a multi-byte character would send invalid UTF-8,
// which the request's JSON encoding turns into a stray U+FFFD in the query.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return s[cut:]
}

// fitEvent shortens turn, the reply first and then the message, until it
// encodes within events.MaxEventBytes: within their own limits, text that
// JSON escapes (<, >, & and control characters take 6 bytes each) can
// still make the event too large, and the publish would refuse it. Each
// byte cut removes at least one encoded byte, so a cut by the excess fits
// at once, unless a cut ends inside a rune (a few bytes more: the loop's
// next round).
func fitEvent(turn *events.Turn) {
	// No escape takes more than 6 bytes: most turns fit without encoding
	// them here (the publish encodes them once).
	if 6*(len(turn.UserMessage)+len(turn.AssistantResponse))+(4<<10) <= events.MaxEventBytes {
		return
	}
	for range 8 {
		data, err := json.Marshal(turn)
		if err != nil {
			return
		}
		over := len(data) - events.MaxEventBytes
		if over <= 0 {
			return
		}
		if n := len(turn.AssistantResponse); n > 0 {
			turn.AssistantResponse = firstBytes(turn.AssistantResponse, max(n-over, 0))
		} else {
			turn.UserMessage = lastBytes(turn.UserMessage, max(len(turn.UserMessage)-over, 1))
		}
	}
}

// firstBytes returns the start of s in at most n bytes, ending on a rune
// boundary.
func firstBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// readBody reads r's body, at most Config.MaxBodyBytes of it within
// Config.BodyTimeout (an error wrapping os.ErrDeadlineExceeded past it:
// bodytime.Bound set it for every request with a body, Handler's).
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes))
}

// chat serves POST /v1/chat/completions.
func (p *Proxy) chat(w http.ResponseWriter, r *http.Request) {
	outcome := p.serveChat(w, r)
	p.obs.Request("chat", outcome)
	abortIfCut(r, outcome)
}

// serveChat serves chat and returns the request's outcome.
func (p *Proxy) serveChat(w http.ResponseWriter, r *http.Request) string {
	r, span := p.startSpan(r)
	defer span.End()
	if p.repeatedUserHeader(w, r) {
		return OutcomeBadRequest
	}
	user, ok := p.user(r)
	if !ok {
		p.unauthorized(w, r)
		return OutcomeUnauthorized
	}
	var bad *events.ValidationError
	if err := events.CheckUserID(user); errors.As(err, &bad) {
		// A gateway's header memoryd would refuse (a key's user id is
		// checked when the key is made, but a key file may be edited):
		// said now, not found later as a chat without memory and a turn
		// that fails to publish.
		from := "of this API key (memoryd keys add checks it; was the key file edited?)"
		if h := p.cfg.TrustedUserHeader; h != "" && strings.TrimSpace(r.Header.Get(h)) != "" {
			from = "in " + h
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_user",
			fmt.Sprintf("the user id %s %s", from, bad.Reason))
		return OutcomeBadRequest
	}
	body, err := p.readBody(w, r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		writeError(w, http.StatusRequestTimeout, "invalid_request_error", "request_timeout",
			fmt.Sprintf("the request body was not sent within %s", p.cfg.BodyTimeout))
		return OutcomeBadRequest
	}
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
			fmt.Sprintf("the request body is over %d bytes or could not be read", p.cfg.MaxBodyBytes))
		return OutcomeBadRequest
	}
	rq, err := parseRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return OutcomeBadRequest
	}
	if n := len(r.Header.Values(MemoryHeader)); n > 1 {
		// Only the first was read: "on" then "off" was enriched and
		// remembered, from a client that sent its opt-out (as the body
		// field given twice is refused).
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request",
			fmt.Sprintf("the %s header was sent %d times: send it once", MemoryHeader, n))
		return OutcomeBadRequest
	}
	switch v := strings.ToLower(strings.TrimSpace(r.Header.Get(MemoryHeader))); v {
	case "off", "false", "0", "no":
		rq.memory = false
	case "", "on", "true", "1", "yes":
	default:
		// An opt-out misspelt must not be remembered as if none were
		// asked: "X-Memory: disabled" was ignored.
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request",
			fmt.Sprintf("the %s header is %q: off (or false, 0, no) opts this request out of memory, on (or true, 1, yes) is the default", MemoryHeader, v))
		return OutcomeBadRequest
	}
	conversation, err := clientConversation(r.Header)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return OutcomeBadRequest
	}
	out := body
	injection := p.enrich(r.Context(), user, rq)
	if _, has := rq.fields["memory"]; has || injection != "" {
		if out, err = rq.body(injection); err != nil {
			p.log.Warn("enriched request not built, forwarding unenriched", "user_id", user, "error", err)
			if out, err = rq.body(""); err != nil {
				writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
				return OutcomeBadRequest
			}
		}
	}
	watch := p.watchIdle(r)
	defer watch.stop()
	req, err := http.NewRequestWithContext(watch.ctx, http.MethodPost, p.upstreamURL("/chat/completions"), bytes.NewReader(out))
	if err != nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_unreachable", err.Error())
		return OutcomeUpstreamUnreachable
	}
	resp, outcome := p.forward(w, r, req)
	if resp == nil {
		return outcome
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		p.logNotFound(user, req.URL.String(), rq)
	}
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode), attribute.Bool("memoryd.enriched", injection != ""))
	}
	var acc reply
	upstreamBody := watch.body(resp.Body)
	remember := resp.StatusCode == http.StatusOK && rq.memory && rq.hasText()
	streamed := resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	var into *reply
	if remember || streamed {
		// A stream is read for its end with memory off too: one that
		// breaks off is cut to the client whether or not it is remembered.
		acc.streamed, acc.discard = streamed, !remember
		into = &acc
	}
	err = relay(w, upstreamBody, into)
	if err != nil && acc.ended {
		// The stream's [DONE] reached the client, whose SDK reads nothing
		// after it and closes the response there (the OpenAI SDKs do),
		// often before the upstream's body has ended: what broke after it,
		// the client leaving or the upstream's body, cost the reply nothing.
		p.log.Debug("stream ended after its [DONE]", "user_id", user, "error", err)
		err = nil
	}
	if err == nil && acc.brokeOff() {
		err = errors.New("the upstream's stream ended without a finish reason or [DONE]")
	}
	if err != nil {
		outcome := watch.outcome(OutcomeCut)
		if outcome == OutcomeUpstreamStalled {
			err = errStalled
		}
		p.log.Warn("reply not relayed whole, turn not published", "user_id", user, "error", err)
		return outcome
	}
	if into != nil && acc.broken {
		// Relayed whole, and an error to the client all the same: not ok.
		p.log.Warn("the upstream's stream carried an error event", "user_id", user, "remembered", false)
		return OutcomeUpstreamStreamError
	}
	if remember && acc.done() {
		if conversation == "" {
			open, ok := readOpening(rq.messages)
			conversation = conversationID(user, open, ok, acc.text.String())
		}
		p.publish(span.SpanContext(), user, rq.text, conversation, &acc)
	}
	return outcome
}

// relay copies the upstream's body to the client as it arrives, flushing
// after every read, and feeds acc (when not nil) the same bytes.
func relay(w http.ResponseWriter, body io.Reader, acc *reply) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return fmt.Errorf("write to client: %w", werr)
			}
			_ = rc.Flush()
			if acc != nil {
				acc.feed(buf[:n])
			}
		}
		if errors.Is(err, io.EOF) {
			if acc != nil {
				acc.end()
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read from upstream: %w", err)
		}
	}
}

// publish publishes the turn in the background with bounded retries; the
// client's response is complete by then and does not depend on it.
// The turn carries sc (the request's span context, when traced), so that
// its ingest and extraction join the request's trace.
func (p *Proxy) publish(sc trace.SpanContext, user, message, conversation string, acc *reply) {
	// A random id, made once per completed reply, so the retries below
	// reuse it. Not the upstream's completion id: servers need not make it
	// unique (Ollama picks one of 999 values), and a repeated id would be
	// dropped as a duplicate by JetStream and the store.
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	turn := events.Turn{
		ID:             "proxy-" + id,
		UserID:         user,
		ConversationID: conversation,
		// Fitted to the turn's limits, or the publish would refuse the
		// turn and nothing of it be remembered: a message by its end, the
		// part enrich searched with (a pasted text before the question), a
		// reply by its start.
		UserMessage: lastBytes(message, events.MaxUserMessageBytes),
		// The answer alone: a reasoning model's thinking, hidden by chat
		// apps, is nothing the user read.
		AssistantResponse: firstBytes(noNUL(answerOf(acc.text.String(), acc.cut())), events.MaxAssistantResponseBytes),
		Timestamp:         time.Now().UTC(),
	}
	fitEvent(&turn)
	p.mu.Lock()
	if p.halted {
		p.mu.Unlock()
		// Stop cut this request's stream as it ended: the NATS
		// connection is about to close.
		p.obs.TurnPublished(false)
		p.log.Error("turn not published: the proxy stopped past its deadline", "user_id", user, "event_id", turn.ID)
		return
	}
	p.publishes.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.publishes.Done()
		var err error
		for attempt := 1; attempt <= p.cfg.PublishAttempts; attempt++ {
			ctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(context.Background(), sc), p.cfg.PublishTimeout)
			_, err = p.pub.Publish(ctx, turn)
			cancel()
			if err == nil || errors.Is(err, events.ErrInvalid) || errors.Is(err, events.ErrRequestRefused) {
				break // done, or final: the turn, or this credential's subject, refused
			}
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // back off between attempts
		}
		p.obs.TurnPublished(err == nil)
		if err != nil {
			p.log.Error("turn not published", "user_id", user, "event_id", turn.ID, "error", err)
			return
		}
		p.log.Debug("turn published", "user_id", user, "event_id", turn.ID)
	}()
}

// noNUL is s with each NUL a space: a turn may hold none (the publish
// refused it, counted a failed publish), and enrich reads a NUL as a word
// break, as the space does.
func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", " ") }

// The messages of the warnings logged for a single request that an outage
// of memoryd, or of the upstream, repeats for every request.
const (
	msgEnrichFailed    = "enrich failed, forwarding unenriched"
	msgEnrichDegraded  = "enrich degraded, forwarding unenriched"
	msgUpstreamFailed  = "upstream request failed"
	msgUpstreamTimeout = "upstream did not answer in time (504)" // before: no line at all
	// before: no line at all, and the chat app showed Ollama's "404 page not found"
	msgUpstreamNotFound = "upstream answered 404 to the chat request, relayed: check that --upstream is its OpenAI base URL (ending in /v1 for OpenAI, Ollama, vLLM and llama.cpp) and that it serves the model"
)

// PerRequestFailures are those messages: a process's log handler may hold
// back their repeats (memoryd's command does).
var PerRequestFailures = []string{msgEnrichFailed, msgEnrichDegraded, msgUpstreamFailed, msgUpstreamTimeout, msgUpstreamNotFound}
