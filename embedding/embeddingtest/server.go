// Package embeddingtest provides a deterministic fake OpenAI-compatible
// embeddings server (POST /v1/embeddings), so that tests run the real
// go-openai code path of embedding.Client, in the manner of
// net/http/httptest.
//
// A text's vector is a hashed bag of its words: each lowercased word adds ±1
// at a dimension chosen by its FNV hash, and the sum is scaled to unit
// length. Texts sharing words are near; the same text always gets the same
// vector. The server can be told to fail, to be slow and to change its
// dimensions, and be stopped and restarted at its address (Stop, Restart).
package embeddingtest

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// DefaultDims is a new Server's dimensions.
const DefaultDims = 64

// Server is a fake embeddings server. Its methods are safe for concurrent
// use.
type Server struct {
	// URL is the API's base URL, ending in /v1: embedding.Config.BaseURL.
	URL string
	// srv serves now (another after Restart), under mu; addr is its
	// address, the same after a Restart.
	srv  *httptest.Server
	addr string
	// closed ends the waits of slow replies when the test ends.
	closed chan struct{}

	mu             sync.Mutex
	dims           int
	status         int    // when not 0, every request fails with it
	retryAfter     string // sent with status
	failN          int    // when > 0, the next failN requests fail with status
	delay          time.Duration
	requests       int
	batches        []int
	inputs         []string
	models         []string
	dimensions     []int // every answered request's "dimensions", 0 when it sent none
	aliases        map[string]string
	garbage        bool
	refuseOver     int    // when > 0, a request with a longer input is refused (400)
	refuseWith     string // when set, a request with an input holding it is refused (400)
	failWith       string // when set, a request with an input holding it fails with failWithStatus
	failWithStatus int
	sent           [][]string // every request's inputs, failed ones included
	breaks         map[string]Break
	errorBody      string // when set, the body of failed replies
	failFrom       int    // when > 0, the failFrom-th request from now and every later one fail with failFromStatus
	failFromStatus int
	dropN          int    // when > 0, the next dropN requests are cut off
	crashOn        string // when set, a request with an input holding it is cut off, and so are the crashDown that follow
	crashDown      int
	crashStatus    int    // when set, the crashDown requests after a crash are answered with it rather than cut off
	crashRetry     string // their Retry-After, when set
	answerN        int    // requests still to answer with crashStatus
	altDims        int    // when > 0, answered requests alternate between dims and altDims
	otherDimsWith  string // when set, an input holding it is answered with a vector of otherDims
	otherDims      int
	answered       int    // requests answered with vectors, counted for altDims
	crashAnswered  bool   // the crashing request itself is answered with crashStatus, not cut off
	key            string // SetKey's

	// HoldContaining's:
	holdWith string        // when set, a request with an input holding it waits for hold to close
	hold     chan struct{} // HoldContaining's, closed by its release
	held     int           // requests waiting on hold
}

// Break is how BreakVector spoils a text's vector.
type Break int

// The ways of BreakVector.
const (
	// NullVector sends null for the whole embedding.
	NullVector Break = iota + 1
	// NullEntries sends null for some of its entries: llama.cpp's JSON of
	// a NaN.
	NullEntries
	// ZeroVector sends all zeros.
	ZeroVector
)

// BreakVector makes later replies spoil, as how says, the vector of every
// input that contains text, the others' staying good; until Recover.
func (s *Server) BreakVector(text string, how Break) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := maps.Clone(s.breaks) // replaced, never changed in place: serve reads it unlocked
	if b == nil {
		b = map[string]Break{}
	}
	b[text] = how
	s.breaks = b
}

// ErrorBody makes failed replies (Fail, FailNext) carry body instead of
// an OpenAI-style error, with its content type guessed from it.
func (s *Server) ErrorBody(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorBody = body
}

// RefuseOver makes the server refuse (400, as OpenAI and vLLM answer an
// input over the model's context) every later request holding an input
// longer than n bytes.
func (s *Server) RefuseOver(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseOver = n
}

// RefuseContaining makes the server refuse (400) every later request
// holding an input that contains text.
func (s *Server) RefuseContaining(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseWith = text
}

// FailContaining makes every later request holding an input that contains
// text fail with status (a server error, not a refusal of the input: the
// whole request fails, as when one text crashes the model runner), until
// Recover.
func (s *Server) FailContaining(text string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith, s.failWithStatus = text, status
}

// FailFrom makes the n-th request from now (1: the next) and every later
// one fail with status, until Recover: a server that goes down in the
// middle of a job's requests.
func (s *Server) FailFrom(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failFrom, s.failFromStatus = n, status
}

// Drop makes the next n requests (every request until Recover, when n is
// negative) end without a reply: the server closes their connection once
// it has read them (a server that crashed, or was restarted,
// mid-request).
func (s *Server) Drop(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropN = n
}

// CrashOn makes every later request holding an input that contains text
// end without a reply, as Drop's do, and the down requests that follow it
// too, whatever they hold (a model runner that a text crashes, and that
// takes a while to come back), until Recover.
func (s *Server) CrashOn(text string, down int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashOn, s.crashDown, s.crashStatus, s.crashAnswered = text, down, 0, false
}

// CrashOnAnswering is CrashOn, but the down requests that follow a crash
// are answered with status (and a Retry-After header when retryAfter is
// set) rather than cut off: a server that answers 503 while it loads the
// model again, or a proxy in front of it that answers while it is down.
func (s *Server) CrashOnAnswering(text string, down, status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashOn, s.crashDown, s.crashStatus, s.crashRetry, s.crashAnswered = text, down, status, retryAfter, false
}

// CrashOnBehindProxy is CrashOnAnswering as a proxy in front of the
// crashing server answers it (LiteLLM before vLLM, say): the request
// holding text is answered with status too, and so are the down requests
// that follow it, until Recover.
func (s *Server) CrashOnBehindProxy(text string, down, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crashOn, s.crashDown, s.crashStatus, s.crashRetry, s.crashAnswered = text, down, status, "", true
}

// Sent is the inputs of every request that reached the server, failed ones
// included, in order.
func (s *Server) Sent() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Alias makes the word from (any case) embed as the word to from now on.
func (s *Server) Alias(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := maps.Clone(s.aliases) // replaced, never changed in place: serve reads it unlocked
	if a == nil {
		a = map[string]string{}
	}
	a[strings.ToLower(from)] = strings.ToLower(to)
	s.aliases = a
}

// Garbage makes later replies (until Recover) carry zero vectors: a
// well-formed reply that no caller can use.
func (s *Server) Garbage() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.garbage = true
}

// SetKey makes the server answer 401 to every later request whose bearer
// token is not key, quoting the token it got as OpenAI does ("Incorrect
// API key provided: ..."): a provider that rotated memoryd's key. "" takes
// any (the default). Recover leaves it.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// New starts a Server of DefaultDims dimensions, closed when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a Server of DefaultDims dimensions outside a test (for
// benchmarks and tools); Close stops it.
func Start() *Server {
	s := &Server{dims: DefaultDims, closed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.addr = s.srv.Listener.Addr().String()
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close ends the waits of slow replies and stops the server. Call it once.
func (s *Server) Close() {
	close(s.closed)
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	srv.Close()
}

// Stop closes the server's listener and every connection, requests in
// flight cut without a reply, as a server that crashed: its address
// refuses connections until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	srv.CloseClientConnections()
	srv.Close()
}

// Restart serves again at the address Stop closed (URL unchanged), as a
// supervisor restarts a crashed server; the failures it was told to give
// are kept (Recover ends them).
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("embeddingtest: listen again at %s: %w", s.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	_ = srv.Listener.Close() // its own, on a port of its choosing
	srv.Listener = ln
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// SetDims changes the dimensions of later replies.
func (s *Server) SetDims(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dims = d
}

// AlternateDims makes the requests answered with vectors from now on
// alternate between the server's dimensions and d, starting with the
// server's: another model behind the name between two requests of one
// batch's halving (an alias repointed, a proxy's fallback).
// AlternateDims(0) ends it.
func (s *Server) AlternateDims(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.altDims, s.answered = d, 0
}

// OtherDimsContaining makes later replies answer every input that
// contains text with a vector of d dimensions, the others' keeping the
// server's: a server whose answer's size depends on the text (a proxy
// routing some inputs to another model). OtherDimsContaining("", 0) ends it.
func (s *Server) OtherDimsContaining(text string, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.otherDimsWith, s.otherDims = text, d
}

// Fail makes every later request fail with status (and a Retry-After
// header when retryAfter is set) until Recover.
func (s *Server) Fail(status int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.retryAfter, s.failN = status, retryAfter, 0
}

// FailNext makes the next n requests fail with status, then serve again.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.retryAfter, s.failN = status, "", n
}

// Recover ends every failure the server was told to give (Fail, FailNext,
// FailFrom, FailContaining, Drop, CrashOn, Garbage, BreakVector,
// ErrorBody).
func (s *Server) Recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.retryAfter, s.failN, s.garbage, s.breaks, s.errorBody = 0, "", 0, false, nil, ""
	s.failWith, s.failWithStatus = "", 0
	s.dropN, s.crashOn, s.crashDown, s.crashStatus, s.answerN, s.crashAnswered = 0, "", 0, 0, 0, false
	s.failFrom, s.failFromStatus = 0, 0
}

// HoldContaining makes every later request with an input holding text
// wait, before it is answered (or fails as told), until release is called
// (or the client goes); Held counts those waiting. A test holds a job in
// its model request this way, to run something beside it, and lets it go
// when it chooses, without a delay's guess. Another HoldContaining, or
// release, ends the hold of later requests.
func (s *Server) HoldContaining(text string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.holdWith, s.hold = text, ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.hold == ch {
				s.holdWith, s.hold = "", nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Held is how many requests wait on HoldContaining's hold now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// SetDelay makes every later request wait d (or until the client goes)
// before it is answered.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Requests is how many requests reached the server, failed ones included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Batches is the input count of every request answered with vectors, in
// order.
func (s *Server) Batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

// Inputs is every text embedded by a request answered with vectors, in
// order.
func (s *Server) Inputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// Dimensions is the "dimensions" of every request answered with vectors
// (0 where it sent none); a request that sends one is answered with
// vectors of that size, as OpenAI's text-embedding-3-* models are.
func (s *Server) Dimensions() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.dimensions...)
}

// Models is the model named by every request answered with vectors.
func (s *Server) Models() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.models...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.NotFound(w, r)
		return
	}
	// The body is read first, so that the server notices a client that
	// gives up while it is slow.
	var req struct {
		Input      []string `json:"input"`
		Model      string   `json:"model"`
		Dimensions int      `json:"dimensions"`
	}
	decodeErr := json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	s.requests++
	s.sent = append(s.sent, slices.Clone(req.Input))
	status, retryAfter, delay, dims, garbage, aliases := s.status, s.retryAfter, s.delay, s.dims, s.garbage, s.aliases
	refuseOver, refuseWith, breaks, errorBody := s.refuseOver, s.refuseWith, s.breaks, s.errorBody
	if sent, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); s.key != "" && sent != s.key {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"message": "Incorrect API key provided: " + sent, "type": "invalid_request_error"}})
		_, _ = w.Write(body)
		return
	}
	if s.failN > 0 {
		if s.failN--; s.failN == 0 {
			s.status = 0
		}
	}
	if s.failWith != "" && status == 0 && slices.ContainsFunc(req.Input, func(in string) bool { return strings.Contains(in, s.failWith) }) {
		status = s.failWithStatus // answered as Fail's failures are
	}
	if s.failFrom > 0 {
		if s.failFrom--; s.failFrom == 0 {
			s.status = s.failFromStatus // from this request on, as Fail's
			status = s.status
		}
	}
	drop := s.dropN != 0
	if s.dropN > 0 {
		s.dropN--
	}
	if s.answerN > 0 {
		s.answerN--
		status, retryAfter = s.crashStatus, s.crashRetry
	}
	if s.crashOn != "" && slices.ContainsFunc(req.Input, func(in string) bool { return strings.Contains(in, s.crashOn) }) {
		switch {
		case s.crashAnswered:
			status, retryAfter, s.answerN = s.crashStatus, s.crashRetry, s.crashDown
		case s.crashStatus != 0:
			drop, s.answerN = true, s.crashDown
		default:
			drop, s.dropN = true, s.crashDown
		}
	}
	var hold chan struct{}
	if s.holdWith != "" && slices.ContainsFunc(req.Input, func(in string) bool { return strings.Contains(in, s.holdWith) }) {
		hold = s.hold
		s.held++
	}
	s.mu.Unlock()
	if hold != nil {
		released := false
		select {
		case <-hold:
			released = true
		case <-r.Context().Done():
		case <-s.closed:
		}
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
		if !released {
			return
		}
	}
	if drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
			return
		}
		panic(http.ErrAbortHandler) // not hijackable (HTTP/2): the server resets the stream
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	if status != 0 {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		body := `{"error":{"message":"embeddingtest: told to fail","type":"server_error"}}`
		if errorBody != "" {
			body = errorBody
		}
		w.Header().Set("Content-Type", http.DetectContentType([]byte(body)))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return
	}
	if decodeErr != nil || len(req.Input) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"input must be a non-empty list of strings","type":"invalid_request_error"}}`))
		return
	}
	for _, text := range req.Input {
		if (refuseOver > 0 && len(text) > refuseOver) || (refuseWith != "" && strings.Contains(text, refuseWith)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"embeddingtest: this model's maximum context length is exceeded","type":"invalid_request_error"}}`))
			return
		}
	}
	s.mu.Lock()
	if s.altDims > 0 {
		if s.answered++; s.answered%2 == 0 {
			dims = s.altDims
		}
	}
	otherWith, other := s.otherDimsWith, s.otherDims
	s.mu.Unlock()
	if req.Dimensions > 0 {
		dims = req.Dimensions // shortened on request, as OpenAI's text-embedding-3-*
	}
	// Written by hand: encoding/json cannot write a null entry.
	type embedding struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}
	resp := struct {
		Object string      `json:"object"`
		Model  string      `json:"model"`
		Data   []embedding `json:"data"`
	}{Object: "list", Model: req.Model}
	for i, text := range req.Input {
		d := dims
		if otherWith != "" && strings.Contains(text, otherWith) {
			d = other
		}
		v := vectorOf(words(text, aliases), d)
		if garbage {
			clear(v)
		}
		how := Break(0)
		for sub, b := range breaks {
			if strings.Contains(text, sub) {
				how = b
			}
		}
		if how == ZeroVector {
			clear(v)
		}
		raw, _ := json.Marshal(v)
		switch how {
		case NullVector:
			raw = []byte("null")
		case NullEntries:
			parts := strings.Split(strings.Trim(string(raw), "[]"), ",")
			for j := 0; j < len(parts); j += 3 {
				parts[j] = "null"
			}
			raw = []byte("[" + strings.Join(parts, ",") + "]")
		}
		resp.Data = append(resp.Data, embedding{Object: "embedding", Index: i, Embedding: raw})
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(req.Input))
	s.inputs = append(s.inputs, req.Input...)
	s.models = append(s.models, req.Model)
	s.dimensions = append(s.dimensions, req.Dimensions)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// Vector is the server's vector of text in dims dimensions: its hashed bag
// of words, unit length (zero for a text without words).
func Vector(text string, dims int) []float32 { return vectorOf(words(text, nil), dims) }

// words are text's lowercased words, aliased.
func words(text string, aliases map[string]string) []string {
	ws := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range ws {
		if a, ok := aliases[w]; ok {
			ws[i] = a
		}
	}
	return ws
}

func vectorOf(words []string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range words {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		x := h.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(dims)] += sign
	}
	var sum float64
	for _, x := range v {
		sum += float64(x * x)
	}
	if sum > 0 {
		inv := float32(1 / math.Sqrt(sum))
		for i := range v {
			v[i] *= inv
		}
	}
	return v
}
