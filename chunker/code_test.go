package chunker

import (
	"os"
	"strings"
	"testing"
	"unicode"
)

func TestCodeLanguage(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"store.go": "go", "store/store.go": "go", `C:\src\app.PY`: "python", "index.d.ts": "typescript",
		"https://github.com/x/y/blob/main/lib.rs?plain=1#L10": "rust", "Dockerfile": "dockerfile",
		"deploy/Makefile": "makefile", "compose.yaml": "yaml", "go.mod": "go",
		"README.md": "", "notes.txt": "", "LICENSE": "", "": "", ".go": "", "https://example.com/": "",
		// A query or fragment after a name without a scheme and host:
		// a download link's "?raw=1", an editor's "#L10".
		"app.py?raw=1": "python", "src/lib.rs#L10-L20": "rust", "deploy/Dockerfile?ref=main#top": "dockerfile",
		"//cdn.example.com/app.js?v=3": "javascript", "README.md?plain=1": "", "notes?.go": "",
		"samples/C#/Program.cs": "csharp", "samples/C#/Program.cs#L3": "csharp",
		// Configuration, whose "#" comments are no headings.
		"Dockerfile.prod": "dockerfile", "prod.Dockerfile": "dockerfile", "Containerfile.dev": "dockerfile",
		"Dockerfile.md": "", "Makefile.am": "makefile", ".env": "dotenv", ".env.local": "dotenv", "prod.env": "dotenv",
		".env.md": "", "my.ini": "ini", "setup.cfg": "ini", "my.cnf": "ini", "/etc/logrotate.conf": "conf",
		"logging.properties": "properties", "e2scrub@.service": "ini", "apt-daily.timer": "ini",
		".gitignore": "gitignore", ".bashrc": "bash", "Jenkinsfile": "groovy", "Gemfile": "ruby",
	} {
		if got := CodeLanguage(name); got != want {
			t.Errorf("CodeLanguage(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestLanguage: a document is code by its name, or, when its name has no
// extension, by the interpreter its "#!" line names.
func TestLanguage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, content, want string }{
		{"deploy", "#!/bin/sh\n# Deploy.\nmake\n", "bash"},
		{"bin/run", "\ufeff#!/usr/bin/env -S PYTHONPATH=. python3.12 -u\nprint(1)\n", "python"},
		{"serve", "#!/usr/bin/node\n", "javascript"},
		{"tool", "#!/usr/bin/awk -f\n", "awk"},
		{"app.py", "#!/bin/sh\n", "python"}, // the name first
		{"notes.txt", "#!/bin/sh\n", ""},    // an extension says prose
		{"notes", "# Notes\n\nText.\n", ""},
		{"notes", "#!\n", ""},
		{"notes", "#! \u00e9t\u00e9\n", ""},
	} {
		if got := Language(tt.name, tt.content); got != tt.want {
			t.Errorf("Language(%q, %q) = %q, want %q", tt.name, tt.content, got, tt.want)
		}
	}
}

// checkCode holds what every chunk of a code document keeps: its text is
// its source slice between the fence lines (none when they would take
// over half a chunk), within the size, with no heading path or one
// declaration's name (a Go method's Type.Name: its parts in the source); the slice starts a line (its indentation kept) or
// continues a line cut between words; every non-blank byte is in a chunk.
func checkCode(t *testing.T, src string, cfg Config, cs []Chunk) {
	t.Helper()
	cfg = cfg.WithDefaults()
	// The fence lines, or none when they would take over half a chunk
	// (a source with long runs of both backticks and tildes).
	open, closing := codeFence(src)+cfg.Code+"\n", "\n"+codeFence(src)
	if Tokens(open)+Tokens(closing) > cfg.MaxTokens/2 {
		open, closing = "", ""
	}
	covered := make([]bool, len(src))
	for i, c := range cs {
		if want := open + src[c.Start:c.End] + closing; c.Text != want {
			t.Fatalf("chunk %d is %q, want its source between fences %q", i, c.Text, want)
		}
		if c.Tokens != Tokens(c.Text) || c.Tokens > cfg.MaxTokens || len(c.Headings) > 1 || len(c.Headings) == 1 && !inSource(src, c.Headings[0]) || c.Index != i {
			t.Errorf("chunk %d: %d tokens (max %d), headings %q, index %d", i, c.Tokens, cfg.MaxTokens, c.Headings, c.Index)
		}
		if ls := strings.LastIndexByte(src[:c.Start], '\n') + 1; c.Start > ls && strings.Trim(src[ls:c.Start], " \t") == "" {
			t.Errorf("chunk %d starts after its line's indentation: %q", i, c.Text)
		}
		if i > 0 && (c.Start <= cs[i-1].Start || c.Start < cs[i-1].End && Tokens(src[c.Start:cs[i-1].End]) > cfg.Overlap) {
			t.Errorf("chunk %d [%d,%d) after [%d,%d): not moving on, or overlapping over %d tokens", i, c.Start, c.End, cs[i-1].Start, cs[i-1].End, cfg.Overlap)
		}
		for j := c.Start; j < c.End; j++ {
			covered[j] = true
		}
	}
	for j, r := range src {
		if !covered[j] && !unicode.IsSpace(r) && r != '\ufeff' {
			t.Fatalf("byte %d (%q) is in no chunk", j, r)
		}
	}
}

// inSource reports whether each part of a declaration's name (a Go
// method's "Type.Name") is in src.
func inSource(src, name string) bool {
	for _, p := range strings.Split(name, ".") {
		if !strings.Contains(src, p) {
			return false
		}
	}
	return true
}

// TestSplitCode: a source code document is cut between lines (a line
// longer than a chunk between words), fenced with its language, its
// lines indented as written; a "# comment" is no heading and a line of
// backticks in it gets a fence of tildes, so that nothing in it closes the
// chunk's fence.
func TestSplitCode(t *testing.T) {
	t.Parallel()
	store, err := os.ReadFile("../store/store.go")
	if err != nil {
		t.Fatal(err)
	}
	py := "\ufeff# Settings.\n\nimport os\n\n\nclass Config:\n    # the port\n    port = int(os.environ.get('PORT', '8080'))\n\n    def url(self):\n        return f\"http://localhost:{self.port}/\"  # no TLS\n" +
		"\nDOC = \"\"\"\n```\nnot a fence\n```\n\"\"\"\n" + strings.Repeat("x = 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12 + 13 + 14 ", 8) + "\n"
	for _, tt := range []struct {
		src, lang string
	}{{string(store), "go"}, {py, "python"}} {
		for _, cfg := range []Config{{Code: tt.lang}, {Code: tt.lang, MaxTokens: 16, Overlap: -1}, {Code: tt.lang, MaxTokens: 64, Overlap: 32}, {Code: tt.lang, MaxTokens: 1000}} {
			cs, err := Split(tt.src, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) == 0 {
				t.Fatalf("%s %+v: no chunk", tt.lang, cfg)
			}
			checkCode(t, tt.src, cfg, cs)
		}
	}
	cs, err := Split(py, Config{Code: "python", MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Text, "~~~python\n# Settings.\n") || !strings.Contains(cs[0].Text, "\n    # the port\n") {
		t.Errorf("a Python file in one chunk: %q", texts(cs))
	}
	if _, err := Split("x", Config{Code: "go lang"}); err == nil || !strings.Contains(err.Error(), `code language "go lang"`) {
		t.Errorf("a code language with a space: %v", err)
	}
}

// TestCodeFenceIsClosedByNoLineOfTheCode: no line of a code document
// closes its chunks' fence, read as a Markdown reader reads the chunk
// (a lone "\r" ends a line, CommonMark) or as enrich injects it (a
// line's leading white space and control characters go, see
// enricher.neutralize: a no-break space or a "\v" before a run of
// backticks leaves the run at the line's start). Before, the fence
// was chosen by the runs after spaces and tabs on "\n" lines only: a
// Python docstring with "\u00a0```" closed the injected chunk's fence
// there, its next lines read as prose and the chunk's own closing fence
// opened one the rest of the injection was read in.
func TestCodeFenceIsClosedByNoLineOfTheCode(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"\u00a0```", "\v```", "\f~~~", "\u3000\t```", "x = 1\r```", "\u2028```", "\x1c````"} {
		src := "DOC = \"\"\"\n" + line + "\nnot code: [x]\n\"\"\"\n"
		cs, err := Split(src, Config{Code: "python"})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 {
			t.Fatalf("%q: %d chunks", line, len(cs))
		}
		lines := strings.FieldsFunc(cs[0].Text, func(r rune) bool { return r == '\n' || r == '\r' })
		fence := strings.TrimSuffix(lines[0], "python")
		for _, l := range lines[1 : len(lines)-1] {
			if l = strings.TrimLeftFunc(l, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); strings.HasPrefix(l, fence) {
				t.Errorf("%q: the line %q closes the fence %q of %q", line, l, fence, cs[0].Text)
			}
		}
	}
}

// TestProtocolDocListsEveryCodeName: docs/protocol.md's docs.put lists
// every extension and file name CodeLanguage reads as code, under the
// language its chunks' fences name, and nothing else: a client (Node, C)
// knows from it alone how a document it names is chunked and fenced.
// Before, it named 23 extensions "and others: chunker.CodeLanguage lists
// them", a Go map a client cannot read.
func TestProtocolDocListsEveryCodeName(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	const lead = "The extensions and names, by the language their fences name: "
	_, list, ok := strings.Cut(strings.ReplaceAll(string(b), "\n", " "), lead)
	if !ok {
		t.Fatalf("docs/protocol.md has no %q", lead)
	}
	list, _, _ = strings.Cut(list, ".  ") // up to the sentence's end
	list, _, _ = strings.Cut(list, ". ")
	documented := map[string]string{}
	for _, entry := range strings.Split(list, "; ") {
		f := strings.Fields(entry)
		for _, name := range f[1:] {
			documented[strings.ToLower(strings.Trim(name, "`"))] = strings.Trim(f[0], "`")
		}
	}
	known := map[string]string{}
	for ext, lang := range codeExtensions {
		known["."+ext] = lang
	}
	for name, lang := range codeNames {
		known[name] = lang
	}
	for prefix, lang := range codePrefixes {
		known[prefix+"*"] = lang
	}
	for name, lang := range known {
		if documented[name] != lang {
			t.Errorf("%s (%s) is documented as %q", name, lang, documented[name])
		}
	}
	for name, lang := range documented {
		if _, ok := known[name]; !ok {
			t.Errorf("%s (%s) is documented but is not code", name, lang)
		}
	}
}
