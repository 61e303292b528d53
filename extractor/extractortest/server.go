// Package extractortest provides a fake OpenAI-compatible chat-completions
// server, so that tests exercise the real go-openai code path of
// extractor.LLM, in the manner of net/http/httptest.
//
// A Server answers POST /v1/chat/completions either from a queue of canned
// replies (the last one repeats forever) or, after SetHandler, from a
// function of the decoded request. Any other path gets a 404.
package extractortest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// emptyExtraction is served when a Server has no replies queued: an
// extraction (reply format v2) that finds nothing.
const emptyExtraction = `{"facts": [], "context": []}`

// Reply is one HTTP reply of the fake server.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Body is the response body, sent as is.
	Body string
	// Header holds extra response headers, e.g. Retry-After. Content-Type
	// defaults to application/json.
	Header http.Header
	// cutAtLimit marks Cut's replies: their usage reports as many
	// completion tokens as the request's limit, as a server's does.
	cutAtLimit bool
}

// Content returns a 200 chat completion whose single choice has the given
// message content, with finish reason "stop" and a usage block of 10 prompt
// and 5 completion tokens.
func Content(content string) Reply {
	return completion(content, openai.FinishReasonStop)
}

// Cut is Content with finish reason "length": a reply the server cut at
// the request's token limit (max_tokens), content being what it sent. Its
// usage reports the request's limit as the completion tokens.
func Cut(content string) Reply {
	r := completion(content, openai.FinishReasonLength)
	r.cutAtLimit = true
	return r
}

// CutShort is a reply with finish reason "length" that the server stopped
// after completionTokens, below the request's max_tokens: its context
// window was full (llama.cpp's server without context shift stops so at
// its slot's share of --ctx-size).
func CutShort(content string, completionTokens int) Reply {
	return completionUsage(content, openai.FinishReasonLength, openai.Usage{PromptTokens: 10, CompletionTokens: completionTokens, TotalTokens: 10 + completionTokens})
}

func completion(content string, reason openai.FinishReason) Reply {
	return completionUsage(content, reason, openai.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15})
}

func completionUsage(content string, reason openai.FinishReason, usage openai.Usage) Reply {
	body, err := json.Marshal(openai.ChatCompletionResponse{
		ID:      "chatcmpl-extractortest",
		Object:  "chat.completion",
		Created: 1700000000,
		Model:   "extractortest",
		Choices: []openai.ChatCompletionChoice{{
			Index:        0,
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			FinishReason: reason,
		}},
		Usage: usage,
	})
	if err != nil {
		panic("extractortest: encoding completion: " + err.Error())
	}
	return Reply{Body: string(body)}
}

// Error returns a reply with the given status and an OpenAI-style error
// body carrying message.
func Error(status int, message string) Reply {
	body, err := json.Marshal(map[string]any{
		"error": map[string]any{"message": message, "type": "extractortest_error"},
	})
	if err != nil {
		panic("extractortest: encoding error: " + err.Error())
	}
	return Reply{Status: status, Body: string(body)}
}

// Server is a fake OpenAI-compatible server listening on 127.0.0.1. Its
// methods are safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	requests atomic.Int64

	mu      sync.Mutex
	replies []Reply
	next    int
	last    []byte
	handler func(req openai.ChatCompletionRequest) Reply
	key     string // SetKey's
}

// SetKey makes the server answer 401 to a request whose bearer token is
// not key, quoting the token it got as OpenAI does ("Incorrect API key
// provided: ..."); "" takes any request, as before the first call.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// NewServer starts a server that serves replies in order, repeating the last
// one forever; with no replies it serves an empty extraction. The server is
// closed by t.Cleanup, which waits for requests in flight.
func NewServer(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{replies: append([]Reply(nil), replies...)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.srv.Close)
	return s
}

// URL returns the base URL for extractor.LLMConfig.BaseURL, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Requests returns the number of chat completion requests received so far,
// counted when a request arrives, before it is answered.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// LastRequest returns a copy of the body of the last chat completion request,
// or nil if none arrived yet.
func (s *Server) LastRequest() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.last...)
}

// SetHandler makes the server compute every following reply from the
// decoded request, instead of serving the queue. h runs on the server's
// goroutine for each request, possibly concurrently; it may block (for
// example on a channel) to hold a request in flight.
func (s *Server) SetHandler(h func(req openai.ChatCompletionRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		write(w, Error(http.StatusNotFound, "extractortest serves only POST /v1/chat/completions"))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		write(w, Error(http.StatusBadRequest, "reading request body: "+err.Error()))
		return
	}
	s.requests.Add(1)

	s.mu.Lock()
	s.last = body
	if sent, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); s.key != "" && sent != s.key {
		s.mu.Unlock()
		write(w, Error(http.StatusUnauthorized, "Incorrect API key provided: "+sent))
		return
	}
	h := s.handler
	var reply Reply
	if h == nil {
		reply = s.nextReplyLocked()
	}
	s.mu.Unlock()

	if h != nil {
		var req openai.ChatCompletionRequest
		if err := json.Unmarshal(body, &req); err != nil {
			write(w, Error(http.StatusBadRequest, "decoding request: "+err.Error()))
			return
		}
		reply = h(req)
	}
	if reply.cutAtLimit {
		reply = cutAt(reply, body)
	}
	write(w, reply)
}

// cutAt returns r with its usage's completion tokens the limit the request
// (body) set, max_tokens or max_completion_tokens; r as it is without one.
func cutAt(r Reply, body []byte) Reply {
	var req openai.ChatCompletionRequest
	var resp openai.ChatCompletionResponse
	if json.Unmarshal(body, &req) != nil || json.Unmarshal([]byte(r.Body), &resp) != nil {
		return r
	}
	limit := max(req.MaxTokens, req.MaxCompletionTokens)
	if limit == 0 {
		return r
	}
	resp.Usage.CompletionTokens = limit
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + limit
	b, err := json.Marshal(resp)
	if err != nil {
		panic("extractortest: encoding completion: " + err.Error())
	}
	r.Body = string(b)
	return r
}

func (s *Server) nextReplyLocked() Reply {
	if len(s.replies) == 0 {
		return Content(emptyExtraction)
	}
	r := s.replies[min(s.next, len(s.replies)-1)]
	s.next++
	return r
}

func write(w http.ResponseWriter, r Reply) {
	for k, vs := range r.Header {
		w.Header()[k] = append([]string(nil), vs...)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, r.Body)
}
