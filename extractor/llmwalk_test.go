package extractor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// A reply whose only defect is a trailing comma (common from local models
// without constrained decoding) is read: the commas before a closing
// bracket or brace are dropped. Before, it was rejected with a reason that
// named the wrong defect (scanReply fell through to the inner fact object,
// which has neither member), sent to the model as its correction.
func TestLLMWalkTrailingCommaReason(t *testing.T) {
	t.Parallel()
	res, err := parseOutput(`{"facts":[{"op":"set","key":"sport","value":"tennis"},],"context":[],}`)
	if err != nil {
		t.Fatalf("reply with trailing commas rejected: %v", err)
	}
	if want := map[string]string{"sport": "tennis"}; !maps.Equal(res.Facts, want) {
		t.Errorf("facts %v, want %v", res.Facts, want)
	}
	// A comma inside a string is text, not a trailing comma.
	res, err = parseOutput("{\"facts\":[{\"key\":\"motto\",\"value\":\"yes, ]\",},]}")
	if err != nil || res.Facts["motto"] != "yes, ]" {
		t.Errorf("facts %v, %v; want motto %q", res.Facts, err, "yes, ]")
	}
}

// A reply that is not valid JSON for another reason (a missing comma, a
// reply cut short) is rejected as such, with the decoder's message, not
// with the rejection of an object inside it.
func TestLLMWalkInvalidJSONReason(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		`{"facts":[{"op":"set","key":"sport","value":"tennis"}] "context":[]}`,
		`{"facts":[{"op":"set","key":"sport","value":"tennis"},{"op":"set","key":"ci`,
		"```json\n{\"facts\":[{\"key\":\"sport\",\"value\":\"tennis\"}]\n\"context\":[]}\n```",
	} {
		_, err := parseOutput(reply)
		if err == nil || !strings.Contains(err.Error(), "reply is not valid JSON: ") || strings.Contains(err.Error(), "neither") {
			t.Errorf("parseOutput(%q) = %v, want it not valid JSON", reply, err)
		}
		if err != nil && len(err.Error()) > len("reply is not valid JSON: ")+maxDetailBytes+len("…") {
			t.Errorf("reason %q is not bounded", err)
		}
	}
	// A stray brace in prose before the object is not the reason: the
	// object standing on its own is, when it is rejected.
	if _, err := parseOutput(`Sure {here}: {"fact": {"name": "Ana"}}`); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Errorf("error %v, want the object's own rejection", err)
	}

	// The model is told the right defect in its correction.
	srv := extractortest.NewServer(t,
		extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}] "context":[]}`),
		extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}]}`))
	if _, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I play tennis")); err != nil {
		t.Fatal(err)
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(srv.LastRequest(), &req); err != nil {
		t.Fatal(err)
	}
	if note := req.Messages[len(req.Messages)-1].Content; !strings.Contains(note, "reply is not valid JSON") || strings.Contains(note, "neither") {
		t.Errorf("correction does not say the reply was not valid JSON: %q", note[max(0, len(note)-400):])
	}
}

// A context pair whose answer (or question) is empty, null or blank is
// dropped: enrich would inject a question with no answer.
func TestLLMWalkEmptyAnswerKept(t *testing.T) {
	t.Parallel()
	res, err := parseOutput(`{"facts":[],"context":[{"q":"Null answer?","a":null},{"q":"Empty answer?","a":""},{"q":"Blank?","a":"  "},{"q":"","a":"no question"},{"q":"Kept?","a":"yes"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Context) != 1 || res.Context[0] != (QA{Q: "Kept?", A: "yes"}) {
		t.Fatalf("context %#v, want only the pair with both", res.Context)
	}
	batch, err := parseBatchOutput(`{"facts":[],"context":[{"turn":1,"q":"Empty answer?","a":""},{"turn":2,"q":"Null?","a":null},{"turn":2,"q":"Kept?","a":"yes"}]}`, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Context[0]) != 0 || len(batch.Context[1]) != 1 {
		t.Fatalf("batch context %#v, want only the pair with both", batch.Context)
	}
}

// A fact key in a non-Latin script is dropped, and an accented Latin key
// is spelled without its accents, not mangled; every dropped key is logged
// at debug, without its value. Before, "年齢" was dropped without a word,
// "größe" stored as "gr_e" and "café_préféré" as "caf_pr_f_r".
func TestLLMWalkNonASCIIKeys(t *testing.T) {
	t.Parallel()
	reply := `{"facts":[{"op":"set","key":"年齢","value":"30"},{"op":"set","key":"größe","value":"180"},` +
		`{"op":"set","key":"café_préféré","value":"Flore"},{"op":"set","key":"user_年齢","value":"31"},` +
		`{"op":"set","key":"Æsthetic Style","value":"minimal"},{"op":"set","key":"!!!","value":"x"}]}`
	res, err := parseOutput(reply)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"grosse": "180", "cafe_prefere": "Flore", "aesthetic_style": "minimal"}
	if !maps.Equal(res.Facts, want) {
		t.Errorf("facts %v, want %v", res.Facts, want)
	}
	// The v1 object form too.
	res, err = parseOutput(`{"facts":{"größe":"180","年齢":"30"}}`)
	if err != nil || !maps.Equal(res.Facts, map[string]string{"grosse": "180"}) {
		t.Errorf("object facts %v, %v; want grosse only", res.Facts, err)
	}

	var logs bytes.Buffer
	srv := extractortest.NewServer(t, extractortest.Content(reply))
	l := newTestLLM(t, srv, func(c *LLMConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if _, err := l.Extract(context.Background(), testInput("I'm 30 and 180 cm tall")); err != nil {
		t.Fatal(err)
	}
	dropped := map[string]string{}
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Level, Msg, Key, Reason string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "model fact key dropped" {
			if rec.Level != "DEBUG" {
				t.Errorf("dropped key logged at %s", rec.Level)
			}
			dropped[rec.Key] = rec.Reason
		}
	}
	if len(dropped) != 3 || dropped["年齢"] != whyNotLatin || dropped["user_年齢"] != whyNotLatin || dropped["!!!"] != whyNoWords {
		t.Errorf("dropped keys logged %v, want 年齢, user_年齢 and !!!", dropped)
	}
	if strings.Contains(logs.String(), `"30"`) || strings.Contains(logs.String(), `"31"`) {
		t.Errorf("a dropped key's value is logged: %s", logs.String())
	}
}

// A reply holding only reasoning, or cut at the token limit, fails with a
// reason that names --llm-max-tokens for the operator, and only the final
// error does: the model's correction does not.
func TestLLMWalkTokenLimitHint(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]extractortest.Reply{
		"reasoning only": {Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"The user..."},"finish_reason":"length"}]}`},
		"cut":            extractortest.Cut(`{"facts":[{"op":"set","key":"sport","value":"ten`),
	} {
		srv := extractortest.NewServer(t, reply)
		_, err := newTestLLM(t, srv, func(c *LLMConfig) { c.MaxTokens = 300 }).Extract(context.Background(), testInput("I play tennis"))
		if KindOf(err) != KindInvalidOutput || !strings.Contains(err.Error(), "raise --llm-max-tokens (now 300)") {
			t.Errorf("%s: error %v, want invalid output naming --llm-max-tokens", name, err)
		}
		if strings.Contains(string(srv.LastRequest()), "--llm-max-tokens") {
			t.Errorf("%s: the correction sent to the model names the flag", name)
		}
	}
	// Another invalid reply does not name it.
	srv := extractortest.NewServer(t, extractortest.Content(`I'd rather not.`))
	if _, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I play tennis")); err == nil || strings.Contains(err.Error(), "--llm-max-tokens") {
		t.Errorf("error %v names --llm-max-tokens", err)
	}
}

// A server that refuses the response format asked for (a 400 naming
// response_format) is asked again at once with less, json_schema then
// json_object then none, and every later request asks for that: before,
// every turn failed for good until an operator set --llm-response-format
// (an extraction walk with a local server: 12 of 12). Another 400 fails as
// before and steps nothing down.
func TestLLMStepsDownARefusedResponseFormat(t *testing.T) {
	t.Parallel()
	const schema, object, none = "json_schema", "json_object", "none"
	for _, tt := range []struct {
		name, format string
		refuses      map[string]string // the body of the 400 to a request of each format
		want         []string          // the formats of the requests of two extractions
		wantErr      bool              // the first extraction fails, permanently
	}{
		{"json_schema refused", ResponseFormatJSONSchema, map[string]string{schema: "response_format type json_schema is not supported"},
			[]string{schema, object, object}, false},
		{"both refused", ResponseFormatJSONSchema, map[string]string{schema: "Unsupported value: 'json_schema'", object: "'response_format' of type 'json_object' is not supported with this model"},
			[]string{schema, object, none, none}, false},
		{"json_object refused", ResponseFormatJSONObject, map[string]string{object: "'response_format' of type 'json_object' is not supported with this model"},
			[]string{object, none, none}, false},
		{"another 400", ResponseFormatJSONSchema, map[string]string{schema: "maximum context length exceeded"},
			[]string{schema, schema}, true},
		{"none refused", ResponseFormatNone, map[string]string{none: "response_format is not supported"},
			[]string{none, none}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t)
			var mu sync.Mutex
			var asked []string
			srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
				f := none
				if req.ResponseFormat != nil {
					f = string(req.ResponseFormat.Type)
				}
				mu.Lock()
				asked = append(asked, f)
				mu.Unlock()
				if body, ok := tt.refuses[f]; ok {
					return extractortest.Error(http.StatusBadRequest, body)
				}
				return extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}],"context":[]}`)
			})
			l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = tt.format })
			_, err := l.Extract(context.Background(), testInput("I play tennis"))
			if tt.wantErr != (err != nil) || (err != nil && KindOf(err) != KindPermanent) {
				t.Fatalf("first extraction: %v; want an error: %v (permanent)", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "--llm-response-format") {
				t.Errorf("error %v names --llm-response-format: nothing to set", err)
			}
			res, err := l.Extract(context.Background(), testInput("I play tennis"))
			if !tt.wantErr && (err != nil || res.Facts["sport"] != "tennis") {
				t.Fatalf("second extraction: %+v, %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(asked, tt.want) {
				t.Errorf("formats asked for %v, want %v", asked, tt.want)
			}
		})
	}
}
