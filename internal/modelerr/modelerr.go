// Package modelerr reads what an OpenAI-compatible model server says when
// it fails: the message of its error body, in the forms servers use, and
// its Retry-After header. The LLM client (extractor) and the embeddings
// client (embedding) both quote and honour them; each bounds and redacts
// the message its own way. And how both hold their requests back while the
// server counts as down (HoldBack, Prober, HeldReason), and tell a server
// whose address refuses connections (RefusesConnections).
package modelerr

import (
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Message is the message of an error body: OpenAI's {"error":{"message":
// ...}} (vLLM, LiteLLM, llama.cpp), {"error": "..."} (Ollama, TEI), vLLM's
// older {"object": "error", "message": ...}, and FastAPI's {"detail":
// ...}; a message may be a list of strings (some proxies), joined with
// "; ". It is "" for anything else: an HTML page or plain text is never
// quoted.
func Message(body []byte) string {
	var b struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	if len(b.Error) > 0 && b.Error[0] == '{' {
		var o struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(b.Error, &o) == nil {
			if s := text(o.Message); s != "" {
				return s
			}
		}
	}
	for _, raw := range []json.RawMessage{b.Error, b.Message, b.Detail} {
		if s := text(raw); s != "" {
			return s
		}
	}
	return ""
}

// text is raw as a string, or a list of strings joined; "" otherwise.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		return strings.TrimSpace(strings.Join(ss, "; "))
	}
	return ""
}

// RetryAfter reads a Retry-After header at now: whole seconds or an HTTP
// date (one past is no delay). It reports false when there is none or it
// cannot be read.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// NotConnected reports whether err is a failure to make the connection at
// all: refused, no route, a connect that timed out, or a name that does
// not resolve; nothing was sent. A reset, even one that ends the connect,
// came from a server that took the connection.
func NotConnected(err error) bool {
	var (
		opErr  *net.OpError
		dnsErr *net.DNSError
	)
	if errors.As(err, &dnsErr) {
		return true
	}
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || opErr.Timeout()
}

// EchoWindow is the shortest run of a request's text that HideEcho takes
// for an echo of it: long enough that a server's own words rarely match
// the request by chance, short enough that what is left of an echo cut by
// JSON escapes is a few words at most.
const EchoWindow = 12

// EchoMark stands for a request's text in an error's reason.
const EchoMark = "[request text]"

// HideEcho replaces in reason (an error quoting a server's message) every
// run of at least EchoWindow bytes that one of texts (what the request
// sent: turns, texts to embed) holds, with EchoMark: some servers repeat
// what they were sent in their error messages, and users' text must not
// reach a log or a stored failure through them. Runs a few bytes long
// that the server's own words share with the texts may be hidden too,
// which costs a word of the message, never a user's text.
//
// The callers bound a reason with its whitespace runs made single spaces,
// and a server may quote a text as a JSON or Python string (a newline as
// \n, a quote as \"): each text is also looked for in those forms, so
// that an echo of a text with line breaks is not left whole.
func HideEcho(reason string, texts []string) string {
	if len(reason) < EchoWindow || len(texts) == 0 {
		return reason
	}
	texts = echoForms(texts)
	hidden := make([]bool, len(reason))
	found := false
	for i := 0; i+EchoWindow <= len(reason); i++ {
		w := reason[i : i+EchoWindow]
		for _, t := range texts {
			if strings.Contains(t, w) {
				for j := i; j < i+EchoWindow; j++ {
					hidden[j] = true
				}
				found = true
				break
			}
		}
	}
	if !found {
		return reason
	}
	var b strings.Builder
	for i := 0; i < len(reason); i++ {
		if !hidden[i] {
			b.WriteByte(reason[i])
			continue
		}
		if i == 0 || !hidden[i-1] {
			b.WriteString(EchoMark)
		}
	}
	return strings.ToValidUTF8(b.String(), "")
}

// echoForms returns texts with, for each text, its whitespace runs made
// single spaces and its JSON string form (without the quotes), where they
// are not the text or a part of it (each form costs a scan of its bytes
// per window of the reason).
func echoForms(texts []string) []string {
	out := make([]string, 0, len(texts))
	for _, t := range texts {
		out = append(out, t)
		if f := strings.Join(strings.Fields(t), " "); !strings.Contains(t, f) {
			out = append(out, f)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(t) == nil {
			if j := strings.TrimSuffix(b.String(), "\n"); len(j) >= 2 && j[1:len(j)-1] != t {
				out = append(out, j[1:len(j)-1])
			}
		}
	}
	return out
}
