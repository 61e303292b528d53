package events_test

import (
	"slices"
	"testing"

	"github.com/memoryd/memoryd/events"
)

func TestTextSearchConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		language, config string
		ok               bool
	}{
		{"en", "english", true},
		{"english", "english", true},
		{"de", "german", true},
		{"german", "german", true},
		{"fr", "french", true},
		{"pt", "portuguese", true},
		{"nb", "norwegian", true},
		{"ja", "simple", true},
		{"japanese", "simple", true},
		{"zh", "simple", true},
		{"ko", "simple", true},
		{"pl", "simple", true},
		{"simple", "simple", true},
		{"", "", false},
		{"DE", "", false},
		{"German", "", false},
		{"de-AT", "", false},
		{" de", "", false},
		{"xx", "", false},
		{"klingon", "", false},
		{"english'; DROP TABLE context; --", "", false},
	}
	for _, tt := range tests {
		c, ok := events.TextSearchConfig(tt.language)
		if c != tt.config || ok != tt.ok {
			t.Errorf("TextSearchConfig(%q) = %q, %v; want %q, %v", tt.language, c, ok, tt.config, tt.ok)
		}
	}
	langs := events.Languages()
	if !slices.IsSorted(langs) || !slices.Contains(langs, "ja") || !slices.Contains(langs, "simple") || slices.Contains(langs, "") {
		t.Errorf("Languages() = %q", langs)
	}
	for _, l := range langs {
		if _, ok := events.TextSearchConfig(l); !ok {
			t.Errorf("Languages() lists %q, which TextSearchConfig refuses", l)
		}
	}
	for code, c := range events.LanguageConfigs() {
		if got, ok := events.TextSearchConfig(code); !ok || got != c {
			t.Errorf("LanguageConfigs()[%q] = %q, TextSearchConfig says %q, %v", code, c, got, ok)
		}
	}
}
