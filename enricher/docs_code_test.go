package enricher_test

import (
	"os"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store/storetest"
)

// injectedLine is a line of a chunk's fenced code as system and markdown
// injections write it: its leading tabs as four spaces each, its runs of
// spaces and tabs inside it as written (a struct's aligned columns),
// none at its end, nothing escaped, square brackets kept
// (docs/protocol.md, "Documents in enrich").
func injectedLine(l string) string {
	rest := strings.TrimLeft(l, " \t")
	lead := strings.ReplaceAll(l[:len(l)-len(rest)], "\t", "    ")
	return lead + strings.TrimRight(rest, " \t")
}

// appModule is a Python module whose comments read as Markdown headings
// and whose code holds every format's separators.
const appModule = `# Settings of the app.

import os


class Config:
    # The port the app listens on, from PORT.
    port: int = int(os.environ.get("PORT", "8080"))
    __slots__ = ("port",)

    def url(self) -> str:
        return f"http://localhost:{self.port}/" if self.port | 0 else "*"
`

// TestEnrichInjectsCodeDocumentsAsCode: a document whose source names
// source code (store.go, app.py) is chunked as code and injected as
// code: each chunk fenced with its language, every line kept with its
// indentation, its ":", "|", "_" and "*" not escaped and its square
// brackets kept in system and markdown, and a Python comment no heading
// (a declaration is: app.py's class Config). Before, a Go file put into
// a knowledge base was read as Markdown: unfenced, escaped as prose
// ("x \:= 1", "a\_b"), and app.py's "# Settings of the app." was the
// heading of its chunks.
func TestEnrichInjectsCodeDocumentsAsCode(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	src, err := os.ReadFile("../store/store.go")
	if err != nil {
		t.Fatal(err)
	}
	for source, content := range map[string]string{"store.go": string(src), "app.py": appModule} {
		if _, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "code", Source: source, Content: content}); err != nil {
			t.Fatalf("put %s: %v", source, err)
		}
	}
	three, budget := 3, 8000
	fences := map[string]string{"store.go": "```go\n", "app.py": "```python\n"}
	for _, q := range []struct{ message, source string }{
		{"CancelOnServer cancel request closeDelay connection", "store.go"},
		{"which port does the app listen on from PORT", "app.py"},
	} {
		for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
			r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: q.message, Format: format, Collections: []string{"code"},
				DocsMaxResults: &three, MaxTokens: &budget})
			if len(r.Documents) == 0 || r.Documents[0].Source != q.source {
				t.Fatalf("%s %q: documents %+v, want %s first", format, q.message, r.Documents, q.source)
			}
			for _, d := range r.Documents {
				if !strings.HasPrefix(d.Text, fences[d.Source]) || !strings.HasSuffix(d.Text, "\n```") || len(d.HeadingPath) > 1 ||
					d.Source == "app.py" && len(d.HeadingPath) == 1 && d.HeadingPath[0] != "Config" {
					t.Errorf("%s: chunk %d of %s is not fenced code (%q) headed by a declaration at most: headings %q, text %q", format, d.ChunkIndex, d.Source, fences[d.Source], d.HeadingPath, d.Text)
					continue
				}
				for _, l := range strings.Split(d.Text, "\n")[1:] {
					if strings.TrimSpace(l) == "" {
						continue
					}
					if want := "\n   " + injectedLine(l) + "\n"; !strings.Contains(r.Injection, want) {
						t.Errorf("%s: the injection lacks chunk %d's line %q as written (%q):\n%s", format, d.ChunkIndex, l, want, r.Injection)
					}
				}
			}
		}
	}
}
