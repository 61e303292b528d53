package extractor

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestLLMOneTurnRefusedIsNotAnOutage: a 403 caused by one request's
// content (OpenRouter: "403: Your chosen model requires moderation and
// your input was flagged"; a WAF before a gateway) while the server
// answers every other request must not be taken for a refused key: as
// Unreachable, the job waits --llm-max-outage (30m) before it can fail,
// the log blames memoryd's API key, and the next answer logs "model
// server answering again" (a review of the change that made 401, 403 and
// 404 wait: it did so for this 403).
func TestLLMOneTurnRefusedIsNotAnOutage(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "flagged-text") {
				return extractortest.Error(http.StatusForbidden, "Your chosen model requires moderation and your input was flagged")
			}
		}
		return extractortest.Content(validReply)
	})
	l := newTestLLM(t, srv, nil)
	if _, err := l.Extract(context.Background(), testInput("I'm Ana")); err != nil {
		t.Fatalf("first turn: %v", err)
	}
	_, err := l.Extract(context.Background(), testInput("some flagged-text here"))
	if err == nil {
		t.Fatal("flagged turn: no error")
	}
	if IsUnreachable(err) || IsMisconfigured(err) {
		t.Errorf("a 403 of one request, the server answering others, is taken for an outage/misconfiguration: %v", err)
	}
	if _, err := l.Extract(context.Background(), testInput("I'm Bo")); err != nil {
		t.Fatalf("third turn: %v", err)
	}
}

// TestLLMForbiddenForEveryRequestIsTheKey: 403s to three different
// requests in a row, none answered between, are the key's (a key without
// the right to the model), waited for as a 401 is; the first two are
// those requests' refusals.
func TestLLMForbiddenForEveryRequestIsTheKey(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		return extractortest.Error(http.StatusForbidden, "this key may not use this model")
	})
	l := newTestLLM(t, srv, nil)
	for i, msg := range []string{"I'm Ana", "I'm Bo", "I'm Cy"} {
		_, err := l.Extract(context.Background(), testInput(msg))
		if want := i == 2; IsMisconfigured(err) != want || KindOf(err) == KindPermanent == want {
			t.Errorf("request %d: %v (misconfigured %v, kind %v); want misconfigured %v", i+1, err, IsMisconfigured(err), KindOf(err), want)
		}
	}
}

// TestLLMRefusedKeyErrorSaysSo: a refused key's error (waited for as an
// outage) says what the server refuses, not "transient model server
// error", which read in `memoryd failed` as a passing fault; errors.Is
// still matches ErrTransient.
func TestLLMRefusedKeyErrorSaysSo(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		return extractortest.Error(http.StatusUnauthorized, "Incorrect API key provided")
	})
	l := newTestLLM(t, srv, nil)
	_, err := l.Extract(context.Background(), testInput("I'm Ana"))
	if !IsMisconfigured(err) || !errors.Is(err, ErrTransient) {
		t.Fatalf("401: %v, want a misconfigured error matching ErrTransient", err)
	}
	if msg := err.Error(); strings.Contains(msg, "transient") || !strings.Contains(msg, "refuses this configuration") || !strings.Contains(msg, "401") {
		t.Errorf("401 error %q: want what the server refuses and its status", msg)
	}
}
