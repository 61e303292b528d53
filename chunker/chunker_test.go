package chunker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// texts returns the chunks' texts.
func texts(cs []Chunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

func TestSplit(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12) // 540 chars
	tests := []struct {
		name     string
		src      string
		cfg      Config
		texts    []string
		headings [][]string
	}{
		{
			name:     "empty",
			src:      "",
			texts:    []string{},
			headings: [][]string{},
		},
		{
			name:     "headings only",
			src:      "# A\n\n## B\n",
			texts:    []string{},
			headings: [][]string{},
		},
		{
			// A chunk starting a line keeps its indentation, as its
			// other lines keep theirs.
			name:     "plain text",
			src:      "  Hello world.\n",
			texts:    []string{"  Hello world."},
			headings: [][]string{nil},
		},
		{
			name:  "heading path",
			src:   "Intro line.\n\n# Install\n\nGet it.\n\n## Linux\n\nUse apt.\n\n### Debian\n\nUse apt-get.\n\n## macOS\n\nUse brew.\n\n# Use\n\nRun it.\n",
			texts: []string{"Intro line.", "Get it.", "Use apt.", "Use apt-get.", "Use brew.", "Run it."},
			headings: [][]string{nil, {"Install"}, {"Install", "Linux"}, {"Install", "Linux", "Debian"},
				{"Install", "macOS"}, {"Use"}},
		},
		{
			name:     "setext headings and closing hashes",
			src:      "Title\n=====\n\nBody one.\n\nPart\n---\nBody two.\n\n## Closed ##\nBody three.\n",
			texts:    []string{"Body one.", "Body two.", "Body three."},
			headings: [][]string{{"Title"}, {"Title", "Part"}, {"Title", "Closed"}},
		},
		{
			name:     "not headings",
			src:      "#hashtag is text\n\n    # indented code\n\nTwo lines\nthen ---\n---\n",
			texts:    []string{"#hashtag is text\n\n    # indented code\n\nTwo lines\nthen ---\n---"},
			headings: [][]string{nil},
		},
		{
			name:     "heading inside a code fence is code",
			src:      "# Real\n\n```sh\n# not a heading\necho hi\n```\n\nAfter.\n",
			texts:    []string{"```sh\n# not a heading\necho hi\n```\n\nAfter."},
			headings: [][]string{{"Real"}},
		},
		{
			// "Three sentence here is short." is 8 tokens, over the
			// overlap: its last whole words overlap instead.
			name: "sentences with overlap, words when a sentence is longer",
			src:  "One sentence here is short. Two sentence here is short. Three sentence here is short. Four sentence here is short.",
			cfg:  Config{MaxTokens: 16, Overlap: 7},
			texts: []string{
				"One sentence here is short. Two sentence here is short.",
				"Two sentence here is short. Three sentence here is short.",
				"sentence here is short. Four sentence here is short.",
			},
			headings: [][]string{nil, nil, nil},
		},
		{
			name: "no overlap",
			src:  "One sentence here is short. Two sentence here is short. Three sentence here is short.",
			cfg:  Config{MaxTokens: 16, Overlap: -1},
			texts: []string{
				"One sentence here is short. Two sentence here is short.",
				"Three sentence here is short.",
			},
			headings: [][]string{nil, nil},
		},
		{
			name: "a block boundary is preferred to a sentence boundary",
			src:  "Alpha beta gamma delta. Epsilon zeta eta.\n\nTheta iota kappa lambda. Mu nu xi omicron.",
			cfg:  Config{MaxTokens: 20, Overlap: -1},
			texts: []string{
				"Alpha beta gamma delta. Epsilon zeta eta.",
				"Theta iota kappa lambda. Mu nu xi omicron.",
			},
			headings: [][]string{nil, nil},
		},
		{
			name: "list items are segments",
			src:  "- first item is here\n- second item is here\n- third item is here\n- fourth item is here",
			cfg:  Config{MaxTokens: 16, Overlap: -1},
			texts: []string{
				"- first item is here\n- second item is here\n- third item is here",
				"- fourth item is here",
			},
			headings: [][]string{nil, nil},
		},
		{
			name: "a code block that fits is not cut",
			src:  "Intro sentence is here.\n\n```go\nfunc main() {\n\tfmt.Println(1)\n}\n```",
			cfg:  Config{MaxTokens: 16, Overlap: -1},
			texts: []string{
				"Intro sentence is here.",
				"```go\nfunc main() {\n\tfmt.Println(1)\n}\n```",
			},
			headings: [][]string{nil, nil},
		},
		{
			// Each piece a code block of its own (TestLongCodeBlockReopensItsFence).
			name: "a long code block is cut between lines",
			src:  "```\n" + strings.Repeat("x := compute(a, b)\n", 6) + "```",
			cfg:  Config{MaxTokens: 16, Overlap: -1},
			texts: []string{
				"```\nx := compute(a, b)\nx := compute(a, b)\n```",
				"```\nx := compute(a, b)\nx := compute(a, b)\n```",
				"```\nx := compute(a, b)\nx := compute(a, b)\n```",
			},
			headings: [][]string{nil, nil, nil},
		},
		{
			name: "a long sentence is cut between words",
			src:  long[:len(long)-1],
			cfg:  Config{MaxTokens: 60, Overlap: -1},
			texts: []string{
				strings.TrimSpace(long[:225]),
				strings.TrimSpace(long[225:450]),
				strings.TrimSpace(long[450:]),
			},
			headings: [][]string{nil, nil, nil},
		},
		{
			name: "Japanese is cut after 。 with overlap",
			src:  "東京の天気はどうですか。今日は晴れです。明日は雨が降るでしょう。",
			cfg:  Config{MaxTokens: 24, Overlap: 12},
			texts: []string{
				"東京の天気はどうですか。今日は晴れです。",
				"今日は晴れです。明日は雨が降るでしょう。",
			},
			headings: [][]string{nil, nil},
		},
		{
			name: "Chinese without punctuation is cut between characters",
			src:  strings.Repeat("今天的天气很好", 4),
			cfg:  Config{MaxTokens: 16, Overlap: -1},
			texts: []string{
				strings.Repeat("今天的天气很好", 4)[:16*3],
				strings.Repeat("今天的天气很好", 4)[16*3:],
			},
			headings: [][]string{nil, nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := Split(tt.src, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(cs); !slices.Equal(got, tt.texts) {
				t.Errorf("texts:\n%q\nwant\n%q", got, tt.texts)
			}
			got := make([][]string, len(cs))
			for i, c := range cs {
				got[i] = c.Headings
			}
			if !slices.EqualFunc(got, tt.headings, slices.Equal) {
				t.Errorf("headings %q, want %q", got, tt.headings)
			}
			check(t, tt.src, tt.cfg, cs)
		})
	}
}

// check holds the invariants every split keeps: each chunk is a slice of
// the source, trimmed, within the size, numbered in order, overlapping the
// one before by at most the overlap; every non-blank byte outside heading
// lines is in some chunk.
func check(t *testing.T, src string, cfg Config, cs []Chunk) {
	t.Helper()
	cfg = cfg.WithDefaults()
	covered := make([]bool, len(src))
	for i, c := range cs {
		if c.Index != i {
			t.Fatalf("chunk %d has index %d", i, c.Index)
		}
		// A chunk continuing a code block or table has its head around
		// its slice (TestLongCodeBlockReopensItsFence).
		if c.Start < 0 || c.End > len(src) || c.Start >= c.End || !strings.Contains(c.Text, src[c.Start:c.End]) {
			t.Fatalf("chunk %d [%d,%d) is not its text %q", i, c.Start, c.End, c.Text)
		}
		if c.Text != strings.TrimRightFunc(c.Text, unicode.IsSpace) || strings.TrimLeft(c.Text, " \t") != strings.TrimSpace(c.Text) {
			t.Errorf("chunk %d is not trimmed but for its first line's indentation: %q", i, c.Text)
		}
		if ls := strings.LastIndexByte(src[:c.Start], '\n') + 1; c.Start > ls && strings.Trim(src[ls:c.Start], " \t") == "" {
			t.Errorf("chunk %d starts after its line's indentation: %q", i, c.Text)
		}
		if c.Tokens != Tokens(c.Text) || c.Tokens > cfg.MaxTokens {
			t.Errorf("chunk %d: %d tokens (counted %d), max %d", i, c.Tokens, Tokens(c.Text), cfg.MaxTokens)
		}
		if i > 0 {
			prev := cs[i-1]
			if c.Start <= prev.Start || c.End <= prev.End {
				t.Errorf("chunk %d [%d,%d) does not move on from [%d,%d)", i, c.Start, c.End, prev.Start, prev.End)
			}
			if c.Start < prev.End && Tokens(src[c.Start:prev.End]) > cfg.Overlap {
				t.Errorf("chunk %d overlaps the one before by %d tokens, over %d", i, Tokens(src[c.Start:prev.End]), cfg.Overlap)
			}
		}
		for j := c.Start; j < c.End; j++ {
			covered[j] = true
		}
	}
	lines := strings.SplitAfter(src, "\n")
	pos := 0
	for li, l := range lines {
		headingish := atxLevel(strings.TrimSpace(l)) > 0 || setext(strings.TrimSpace(l)) > 0 ||
			(li+1 < len(lines) && strings.TrimSpace(l) != "" && setext(strings.TrimSpace(lines[li+1])) > 0)
		for j := 0; j < len(l); {
			r, n := utf8.DecodeRuneInString(l[j:])
			if !covered[pos+j] && !unicode.IsSpace(r) && !headingish {
				t.Fatalf("byte %d (%q in line %q) is in no chunk", pos+j, r, l)
			}
			j += n
		}
		pos += len(l)
	}
}

func TestSentences(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want []string
	}{
		{"One. Two! Three? Four", []string{"One.", "Two!", "Three?", "Four"}},
		{"Use e.g. the tool by J. Smith, Dr. Who and Mr. X.", []string{"Use e.g. the tool by J. Smith, Dr. Who and Mr. X."}},
		{"Pi is 3.14 here. Born in 1990. Then.", []string{"Pi is 3.14 here.", "Born in 1990.", "Then."}},
		{"He said \"stop.\" Then left...  Really?!", []string{"He said \"stop.\"", "Then left...", "Really?!"}},
		{"see example.com/a.b now", []string{"see example.com/a.b now"}},
		{"line one\nline two.\n- item a\n- item b\n1. first\n| a | b |", []string{"line one\nline two.", "- item a", "- item b", "1. first", "| a | b |"}},
		{"东京很大。「真的吗？」是的！", []string{"东京很大。", "「真的吗？」", "是的！"}},
	} {
		var got []string
		for _, sp := range sentences(tt.src, span{0, len(tt.src)}) {
			got = append(got, tt.src[sp.s:sp.e])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("sentences(%q) = %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestSplitRefuses(t *testing.T) {
	for _, tt := range []struct {
		src  string
		cfg  Config
		want string
	}{
		{"x", Config{MaxTokens: 8}, "max tokens 8 is not in 16..8192"},
		{"x", Config{MaxTokens: 100, Overlap: 51}, "overlap 51 is not in 0..50"},
		{"a\xffb", Config{}, ErrNotText.Error()},
		{"a\x00b", Config{}, ErrNotText.Error()},
	} {
		_, err := Split(tt.src, tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Split(%q, %+v) = %v, want %q", tt.src, tt.cfg, err, tt.want)
		}
	}
	if _, err := Split("a\xffb", Config{}); !errors.Is(err, ErrNotText) {
		t.Errorf("not ErrNotText: %v", err)
	}
}

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want int
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{"東京", 2},
		{"東京 is big", 2 + 2},
		{"서울", 2},
		{"カタカナ", 4},
		// Other text four UTF-8 bytes a token, as enrich's budget counts.
		{"café", 2},
		{"Αθήνα", 3},
		{"ข้าว", 3},
	} {
		if got := Tokens(tt.s); got != tt.want {
			t.Errorf("Tokens(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestSplitRealDocuments holds the invariants on real Markdown: this
// repository's own documentation, at several sizes.
func TestSplitRealDocuments(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	if len(files) < 5 {
		t.Fatalf("found %d documents", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range []Config{{}, {MaxTokens: 16, Overlap: -1}, {MaxTokens: 64, Overlap: 32}, {MaxTokens: 1000}} {
			cs, err := Split(string(b), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) == 0 {
				t.Fatalf("%s: no chunk", f)
			}
			check(t, string(b), cfg, cs)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("# A\n\ntext. more text!\n\n```\ncode\n```\n", 16, 4)
	f.Add("東京の天気はどうですか。今日は晴れです。", 16, 8)
	f.Add("Title\n===\nbody e.g. this. And that?\n- a\n- b\n| x | y |\n", 20, 0)
	f.Fuzz(func(t *testing.T, src string, max, overlap int) {
		cfg := Config{MaxTokens: max, Overlap: overlap}
		if cfg.WithDefaults().Validate() != nil {
			return
		}
		cs, err := Split(src, cfg)
		if err != nil {
			if errors.Is(err, ErrNotText) {
				return
			}
			t.Fatal(err)
		}
		check(t, src, cfg, cs)
		if HasText(src) != (len(cs) > 0) {
			t.Errorf("HasText = %v, but %d chunks", HasText(src), len(cs))
		}
		for _, lang := range []string{"go", "python", "ini", "yaml", "bash"} { // each's declarations read
			cfg.Code = lang
			if cs, err = Split(src, cfg); err != nil {
				t.Fatal(err)
			}
			checkCode(t, src, cfg, cs)
		}
	})
}

// TestHasText: HasText says whether Split cuts any chunk, so that a
// document chunked later is refused at its put as one chunked at once.
func TestHasText(t *testing.T) {
	for src, want := range map[string]bool{
		"":                              false,
		"# A\n\n## B\n":                 false,
		"---\ntitle: T\n---\n\n# A\n":   false,
		"Title\n=====\n":                false,
		"# A\n\ntext\n":                 true,
		"```\n# not a heading\n```\n":   true,
		"    # indented code\n":         true,
		"- Run:\n\n  ```sh\n\n# Next\n": true,
	} {
		cs, err := Split(src, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if got := HasText(src); got != want || got != (len(cs) > 0) {
			t.Errorf("HasText(%q) = %v, want %v (%d chunks)", src, got, want, len(cs))
		}
	}
}

// pathological are inputs that once cost quadratic time (a period scan
// that looked back to the line's start) or stress one rule each.
func pathological(n int) map[string]string {
	return map[string]string{
		"periods without spaces": strings.Repeat("a.", n),
		"short sentences":        strings.Repeat("a. ", n),
		"abbreviations":          strings.Repeat("e.g. ", n),
		"one long word":          strings.Repeat("a", n),
		"white space":            "x" + strings.Repeat(" ", n) + "y",
		"lines":                  strings.Repeat("a\n", n),
		"headings":               strings.Repeat("# h\n", n/4),
		"fences":                 strings.Repeat("```\n", n/4),
		"list":                   strings.Repeat("- a\n", n/4),
		"cjk":                    strings.Repeat("東", n),
		"cjk sentences":          strings.Repeat("東。", n),
	}
}

func TestSplitPathological(t *testing.T) {
	for name, src := range pathological(4096) {
		for _, cfg := range []Config{{}, {MaxTokens: 8192, Overlap: 4096}, {MaxTokens: 16, Overlap: 8}} {
			cs, err := Split(src, cfg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			check(t, src, cfg, cs)
		}
	}
}

// BenchmarkSplit prints the throughput on this repository's documentation,
// on the pathological inputs (1 MiB each): it stays linear, and on its Go
// files chunked as code.
func BenchmarkSplit(b *testing.B) {
	files, _ := filepath.Glob("../docs/*.md")
	var docs strings.Builder
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		docs.Write(d)
	}
	inputs := pathological(1 << 20)
	inputs["docs"] = docs.String()
	for name, src := range inputs {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Split(src, Config{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The repository's Go files, each a code document.
	code, _ := filepath.Glob("../*/*.go")
	var size int64
	srcs := make([]string, len(code))
	for i, f := range code {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		srcs[i], size = string(d), size+int64(len(d))
	}
	b.Run("code", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			for _, src := range srcs {
				if _, err := Split(src, Config{Code: "go"}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestSplitSouthEastAsianKeepsMarks: a run of Thai, Lao, Khmer or Myanmar
// over the limit (written without spaces) is cut between letters, never
// between a letter and the marks after it, and loses nothing.
func TestSplitSouthEastAsianKeepsMarks(t *testing.T) {
	t.Parallel()
	for _, word := range []string{"ข้าวผัดกุ้ง", "ເຂົ້າໜຽວ", "ធ្វើការនៅធនាគារ", "မန္တလေးကိုသွားမယ်"} {
		src := strings.Repeat(word, 20)
		for max := MinMaxTokens; max < MinMaxTokens+12; max++ {
			cs, err := Split(src, Config{MaxTokens: max, Overlap: -1})
			if err != nil {
				t.Fatal(err)
			}
			var joined strings.Builder
			for _, c := range cs {
				if r, _ := utf8.DecodeRuneInString(c.Text); unicode.In(r, unicode.M) {
					t.Errorf("max %d: chunk %q starts with a mark", max, c.Text)
				}
				joined.WriteString(c.Text)
			}
			if len(cs) < 2 || joined.String() != src {
				t.Errorf("max %d: %d chunks joined to %q, want the source in several", max, len(cs), joined.String())
			}
		}
	}
}
