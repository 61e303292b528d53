package extractor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// pyRepr writes v (decoded JSON) as Python's repr would: vLLM quotes the
// request it refuses so, in the "input" of a validation error.
func pyRepr(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`)
		return "'" + r.Replace(v) + "'"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	}
	return fmt.Sprint(v)
}

// vllmValidationError is the body of vLLM's 400 to a request failing a
// validator of the request as a whole (loc ('body',)), in the form of
// current versions ({"error": {...}}, "N validation error:") or of older
// ones ({"object": "error", ...}, the errors' list repr): the error's
// "input" is the request, response_format and all.
func vllmValidationError(t *testing.T, req openai.ChatCompletionRequest, msg string, older bool) string {
	t.Helper()
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var input any
	if err := json.Unmarshal(raw, &input); err != nil {
		t.Fatal(err)
	}
	e := fmt.Sprintf("{'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, %s', 'input': %s, 'ctx': {'error': ValueError('%s')}}", msg, pyRepr(input), msg)
	var body any = map[string]any{"error": map[string]any{"message": "1 validation error:\n  " + e, "type": "Bad Request", "param": "body", "code": 400}}
	if older {
		body = map[string]any{"object": "error", "message": "[" + e + "]", "type": "BadRequestError", "param": nil, "code": 400}
	}
	out, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// formatOf names the response format of a request.
func formatOf(req openai.ChatCompletionRequest) string {
	if req.ResponseFormat == nil {
		return ResponseFormatNone
	}
	return string(req.ResponseFormat.Type)
}

// TestVLLMFourHundreds: vLLM's 400s and the steps they take.
//
// A 400 to a request that fails one of its validators quotes the request
// whole as the error's "input", response_format and json_schema included,
// outside the messages' text: that is no refusal of the format, and a
// step is for every later request of the process. Before, it stepped
// json_schema down for good. A body cut short (maxErrorBodyBytes) is read
// to its "input".
//
// Its refusals of a schema or a response format step it down: "The
// provided JSON schema contains features not supported by xgrammar." (its
// xgrammar backend, chosen alone), which names no response_format or
// json_schema (before, every turn failed for good), and a validation
// error of response_format itself, whose "input" is the request too.
func TestVLLMFourHundreds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		steps bool // a refusal of the format: stepped down to json_object
		reply func(t *testing.T, req openai.ChatCompletionRequest) extractortest.Reply
	}{
		{"validation, current form", false, func(t *testing.T, req openai.ChatCompletionRequest) extractortest.Reply {
			return extractortest.Reply{Status: http.StatusBadRequest, Body: vllmValidationError(t, req, "max_tokens must be at least 1, got 0.", false)}
		}},
		{"validation, older form", false, func(t *testing.T, req openai.ChatCompletionRequest) extractortest.Reply {
			return extractortest.Reply{Status: http.StatusBadRequest, Body: vllmValidationError(t, req, "max_tokens must be at least 1, got 0.", true)}
		}},
		{"validation, cut short", false, func(t *testing.T, req openai.ChatCompletionRequest) extractortest.Reply {
			body := vllmValidationError(t, req, "max_tokens must be at least 1, got 0.", false)
			return extractortest.Reply{Status: http.StatusBadRequest, Body: body[:strings.Index(body, "'response_format'")+40]}
		}},
		{"xgrammar", true, func(*testing.T, openai.ChatCompletionRequest) extractortest.Reply {
			return extractortest.Reply{Status: http.StatusBadRequest,
				Body: `{"object":"error","message":"The provided JSON schema contains features not supported by xgrammar.","type":"BadRequestError","param":null,"code":400}`}
		}},
		{"response_format invalid", true, func(t *testing.T, req openai.ChatCompletionRequest) extractortest.Reply {
			return extractortest.Reply{Status: http.StatusBadRequest,
				Body: vllmValidationError(t, req, "response_format type json_schema is not supported by this server (parameter=response_format)", false)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t)
			var mu sync.Mutex
			var asked []string
			srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, formatOf(req))
				// A refusal of the format, to every request with it; any
				// other 400, to the first request only.
				schema := req.ResponseFormat != nil && req.ResponseFormat.Type == openai.ChatCompletionResponseFormatTypeJSONSchema
				if (tt.steps && schema) || (!tt.steps && len(asked) == 1) {
					return tt.reply(t, req)
				}
				return extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}],"context":[]}`)
			})
			l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = ResponseFormatJSONSchema })
			want := []string{"json_schema", "json_object"}
			_, err := l.Extract(context.Background(), testInput("I play tennis"))
			if !tt.steps {
				want = []string{"json_schema", "json_schema"}
				if KindOf(err) != KindPermanent {
					t.Fatalf("first extraction: %v, want a permanent error", err)
				}
				_, err = l.Extract(context.Background(), testInput("I play tennis"))
			}
			if err != nil {
				t.Fatalf("extraction: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(asked, want) {
				t.Errorf("formats asked for %v, want %v", asked, want)
			}
		})
	}
}

// TestRefusesFormatBodies: the bodies refusesFormat reads as a refusal of
// the format, and those it does not, whose only mention of it is the
// request they echo.
func TestRefusesFormatBodies(t *testing.T) {
	t.Parallel()
	schema := &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema}
	for _, tt := range []struct {
		body string
		want bool
	}{
		{`{"error":{"code":400,"message":"response_format type json_schema is not supported","type":"invalid_request_error"}}`, true},
		{`{"error":{"message":"Invalid parameter","type":"invalid_request_error","param":"response_format","code":null}}`, true},
		{`{"object":"error","message":"The provided JSON schema contains features not supported by xgrammar.","type":"BadRequestError","param":null,"code":400}`, true},
		{`{"detail":[{"type":"missing","loc":["body","response_format","json_schema"],"msg":"Field required","input":{"type":"json_schema"}}]}`, true},
		{`{"detail":[{"type":"value_error","loc":["body"],"msg":"Value error, max_tokens must be at least 1","input":{"response_format":{"type":"json_schema"}}}]}`, false},
		{`{"error":{"message":"1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, max_tokens must be at least 1', 'input': {'max_tokens': 0, 'response_format': {'type': 'json_schema', 'json_schema': {'name': 'it\\'s', 'schema': {}}}}, 'ctx': {'error': ValueError('max_tokens must be at least 1')}}","type":"Bad Request","param":"body","code":400}}`, false},
		{`{"error":{"message":"1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, max_tokens must be at least 1', 'input': {'response_format': {'type': 'json_sch`, false},
		{`not json: 'input': {'response_format': 1}`, false},
		// A gateway's refusal keyed by the format (its key the only word
		// naming it), and the same key inside the echoed input.
		{`{"errors":{"response_format":["is not supported by this model"]}}`, true},
		{`{"errors":{"max_tokens":["must be at least 1"]},"input":{"response_format":{"type":"json_schema"}}}`, false},
	} {
		if got := refusesFormat(http.StatusBadRequest, []byte(tt.body), schema, nil); got != tt.want {
			t.Errorf("refusesFormat(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}

// TestRefusesFormatIgnoresEchoedRequest: a 400 that echoes the request
// under any key (a gateway's "request", "body", "original_request"; the
// response format or its schema alone; the request's JSON as a string,
// re-serialised) is not read as a refusal of the format for what the echo
// names: a step down is for good. The server's own words beside the echo
// still are.
func TestRefusesFormatIgnoresEchoedRequest(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	for _, format := range []string{ResponseFormatJSONSchema, ResponseFormatJSONObject} {
		l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = format })
		for _, f := range []*openai.ChatCompletionResponseFormat{l.format, l.batchFormat} {
			msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "system"}, {Role: openai.ChatMessageRoleUser, Content: "I play tennis"}}
			req := mustJSON(t, openai.ChatCompletionRequest{Model: "test-model", Messages: msgs, ResponseFormat: f, MaxTokens: 0})
			formatJSON := mustJSON(t, f)
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, []byte(req), "", "    "); err != nil {
				t.Fatal(err)
			}
			str := mustJSON(t, pretty.String())
			echoes := []string{
				`{"error":{"message":"max_tokens must be at least 1","request":` + req + `}}`,
				`{"error":{"message":"max_tokens must be at least 1"},"body":` + req + `}`,
				`{"message":"max_tokens must be at least 1","original_request":{"payload":` + req + `}}`,
				`{"error":{"message":"max_tokens must be at least 1","response_format":` + formatJSON + `}}`,
				`{"error":{"message":"max_tokens must be at least 1","request_body":` + str + `}}`,
				`{"errors":[{"detail":"max_tokens must be at least 1","sent":[` + req + `]}]}`,
				// The request's parameters, without its messages, as a string.
				`{"error":{"message":"max_tokens must be at least 1","params":` + mustJSON(t, `{"model":"test-model","max_tokens":0,"response_format":`+formatJSON+`}`) + `}}`,
			}
			if f.JSONSchema != nil {
				echoes = append(echoes, `{"error":{"message":"max_tokens must be at least 1","json_schema":`+mustJSON(t, f.JSONSchema)+`}}`,
					`{"error":{"message":"max_tokens must be at least 1","schema":`+string(f.JSONSchema.Schema.(json.RawMessage))+`}}`)
			}
			for _, body := range echoes {
				if refusesFormat(http.StatusBadRequest, []byte(body), f, msgs) {
					t.Errorf("%s: refusesFormat(%.200s...) = true, want false: only the echo names the format", f.Type, body)
				}
			}
			for _, body := range []string{
				`{"error":{"message":"Invalid parameter","param":"response_format","request":` + req + `}}`,
				`{"error":{"message":"response_format is not supported by this model","echo":` + formatJSON + `}}`,
				`{"error":{"message":"The provided JSON schema contains features not supported by xgrammar.","request_body":` + str + `}}`,
			} {
				if !refusesFormat(http.StatusBadRequest, []byte(body), f, msgs) {
					t.Errorf("%s: refusesFormat(%.200s...) = false, want true: the server's own words name the format", f.Type, body)
				}
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusesFormatQuotingTheFormat: a server's own refusal that quotes
// the format it refuses, in its message or as a member of its error beside
// the message, is a refusal: the format is stepped down. Only the request
// echoed whole (its messages beside the format) or the format alone under
// a key of its own is left out of the words read. Before, the message
// holding the format's JSON, or the error object holding a
// "response_format" member, was taken for an echo and dropped whole, and
// the 400 failed the turn where it stepped the format down.
func TestRefusesFormatQuotingTheFormat(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	for _, format := range []string{ResponseFormatJSONSchema, ResponseFormatJSONObject} {
		l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = format })
		for _, f := range []*openai.ChatCompletionResponseFormat{l.format, l.batchFormat} {
			msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "system"}, {Role: openai.ChatMessageRoleUser, Content: "I play tennis"}}
			formatJSON := mustJSON(t, f)
			for _, body := range []string{
				`{"error":{"message":` + mustJSON(t, "response_format "+formatJSON+" is not supported by this model") + `,"type":"invalid_request_error"}}`,
				`{"error":{"message":"this response_format is not supported by this model","type":"invalid_request_error","response_format":` + formatJSON + `}}`,
			} {
				if !refusesFormat(http.StatusBadRequest, []byte(body), f, msgs) {
					t.Errorf("%s: refusesFormat(%.300s...) = false, want true: the server's own words name the format", f.Type, body)
				}
			}
		}
	}
}
