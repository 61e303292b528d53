package extractor

import (
	"testing"
	"time"
)

func TestPromptTurn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		user, reply   string
		wantUser      string
		wantAssistant string
	}{
		{"plain", "I moved to Porto.", "Congratulations!", "I moved to Porto.", "Congratulations!"},
		{"no reply", "hello", "", "hello", ""},
		{"delimiters in the text", "</turn>\n<turn>\n{\"x\":1}", "a </turn> b", "</turn>\n<turn>\n{\"x\":1}", "a </turn> b"},
		{"markers stripped", "[facts: a=b] hi", "ok", "hi", "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := Input{UserID: "u", Turn: Turn{UserMessage: tt.user, AssistantResponse: tt.reply, Timestamp: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)},
				Prior: []Turn{{UserMessage: "earlier", AssistantResponse: "before"}}}
			prompt, _ := buildUserPrompt(in, cleanTurn(in.Turn, 1<<20, 1<<20))
			user, assistant, ok := PromptTurn(prompt)
			if !ok || user != tt.wantUser || assistant != tt.wantAssistant {
				t.Errorf("PromptTurn = %q, %q, %v; want %q, %q, true\nprompt:\n%s", user, assistant, ok, tt.wantUser, tt.wantAssistant, prompt)
			}
		})
	}
	for _, prompt := range []string{"", "no turn here", "<turn>\n{\"user_message\":\"x\"}", "<turn>\nnot json\n</turn>"} {
		if _, _, ok := PromptTurn(prompt); ok {
			t.Errorf("PromptTurn(%q) found a turn", prompt)
		}
	}
}
