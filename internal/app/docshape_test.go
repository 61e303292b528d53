package app

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestRepositoryDocumentsKeepTheirShape puts this repository's own
// documents (docs/protocol.md, over 256 KiB, through its chunking job;
// README.md and store/store.go in the request) over NATS into a started
// app, reads every chunk stored, and asks enrich for some of them in the
// system and markdown formats. Every chunk is a slice of its document
// (code between fence lines), nothing but white space and heading lines
// is left out between chunks, no chunk starts after its first line's
// indentation, and every injected chunk has its fences balanced and each
// line at its document's indentation (tabs as four spaces) under its
// entry, its fenced code not escaped. A document of headings only over
// 256 KiB is refused at its put.
func TestRepositoryDocumentsKeepTheirShape(t *testing.T) {
	t.Parallel()
	a := startTestApp(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := events.NewClient(a.nc, a.cfg.Prefix)
	docs := map[string]string{}
	for _, f := range []string{"../../docs/protocol.md", "../../README.md", "../../store/store.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := strings.TrimPrefix(f, "../../")
		docs[src] = string(b)
		r, err := c.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "repo", Source: src, Content: string(b)})
		if err != nil {
			t.Fatalf("put %s: %v", src, err)
		}
		t.Logf("%s: %d bytes, %s, %d chunks, largest %d tokens", src, len(b), r.Status, r.Chunks, r.LargestChunkTokens)
	}
	eventstest.Eventually(t, "docs/protocol.md chunked by its job", time.Minute, func() (bool, string) {
		l, err := c.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "repo"})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range l.Documents {
			if d.Status != events.DocReady {
				return false, d.DocID + " " + d.Status
			}
		}
		return len(l.Documents) == len(docs), fmt.Sprintf("%d documents", len(l.Documents))
	})
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for src, content := range docs {
		rows, err := s.Pool().Query(ctx, `SELECT text, byte_start, byte_end FROM doc_chunks WHERE doc_id = $1 ORDER BY chunk_index`, src)
		if err != nil {
			t.Fatal(err)
		}
		var chunks []storedChunk
		for rows.Next() {
			var ch storedChunk
			if err := rows.Scan(&ch.text, &ch.start, &ch.end); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, ch)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		checkStoredChunks(t, src, content, chunks)
	}

	eight := 8
	budget := 12000
	for _, q := range []string{
		"user token base32 SHA-256 C Python TypeScript code",
		"docker compose up ollama pull llama3.1 profile",
		"CancelOnServer cancel request closeDelay connection kept",
		"nats req memory.enrich permissions alice_frontend",
	} {
		for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
			r, err := c.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: q, Format: format, Collections: []string{"repo"},
				DocsMaxResults: &eight, MaxTokens: &budget})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Documents) == 0 {
				t.Fatalf("%s %q: no document chunk injected", format, q)
			}
			for _, d := range r.Documents {
				checkInjectedChunk(t, format, r.Injection, d)
			}
		}
	}

	var outline strings.Builder
	for i := 0; outline.Len() <= 300<<10; i++ {
		fmt.Fprintf(&outline, "# Part %d\n\n## Chapter %d.1\n\n", i, i)
	}
	if r, err := c.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "repo", Source: "outline.md", Content: outline.String()}); err == nil ||
		!strings.Contains(err.Error(), "no text outside its headings") {
		t.Errorf("put of %d bytes of headings only = %+v, %v; want a 400 saying it has no text", outline.Len(), r, err)
	}
}

type storedChunk struct {
	text       string
	start, end int
}

// checkStoredChunks holds a document's chunks to its source: each is its
// slice (code between fence lines; Markdown with a continued block's
// head or closing fence around it), none starts after its line's
// indentation or leaves a fence open, and between them (overlaps
// aside) there is only white space and heading lines.
func checkStoredChunks(t *testing.T, src, content string, chunks []storedChunk) {
	t.Helper()
	code := strings.HasSuffix(src, ".go")
	covered := 0 // the source is whole up to here
	for i, ch := range chunks {
		slice := content[ch.start:ch.end]
		switch {
		case code && ch.text != "```go\n"+slice+"\n```":
			t.Errorf("%s chunk %d is not its source between fences: %.200q", src, i, ch.text)
		case !strings.Contains(ch.text, slice):
			t.Errorf("%s chunk %d does not hold its source [%d,%d): %.200q", src, i, ch.start, ch.end, ch.text)
		}
		if ls := strings.LastIndexByte(content[:ch.start], '\n') + 1; ch.start > ls && strings.Trim(content[ls:ch.start], " \t") == "" {
			t.Errorf("%s chunk %d starts after its line's indentation %q: %.200q", src, i, content[ls:ch.start], ch.text)
		}
		if f := openFenceOf(strings.Split(ch.text, "\n")); f != "" {
			t.Errorf("%s chunk %d leaves the fence %q open: %.300q", src, i, f, ch.text)
		}
		if ch.start > covered {
			if lost := lostText(content[covered:ch.start], code); lost != "" {
				t.Errorf("%s: between chunks %d and %d the line %q is in no chunk", src, i-1, i, lost)
			}
		}
		covered = max(covered, ch.end)
	}
	if lost := lostText(content[covered:], code); lost != "" {
		t.Errorf("%s: after its last chunk the line %q is in no chunk", src, lost)
	}
}

// headingLine is an ATX heading or a setext underline.
var headingLine = regexp.MustCompile(`^ {0,3}(#{1,6}(\s|$)|=+\s*$|-{2,}\s*$)`)

// lostText is the first line of gap, text between chunks, that is not
// white space or a heading (a heading's text is in its chunks' paths; a
// setext heading's title line is before its underline), "" when none.
func lostText(gap string, code bool) string {
	lines := strings.Split(gap, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if !code && (headingLine.MatchString(l) || i+1 < len(lines) && headingLine.MatchString(lines[i+1]) && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "#")) {
			continue
		}
		return l
	}
	return ""
}

// openFenceOf is the fence lines leave open (docs/protocol.md, "Documents
// in enrich": a run of three or more backticks or tildes after a line's
// indentation, closed by a run as long indented at most three more).
func openFenceOf(lines []string) string {
	fence, open := "", 0
	for _, l := range lines {
		t := strings.TrimLeft(l, " \t")
		in := len(l) - len(t)
		switch {
		case fence != "":
			if in <= open+3 && strings.HasPrefix(t, fence) && strings.Trim(strings.TrimSpace(t), fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence, open = t[:len(t)-len(strings.TrimLeft(t, t[:1]))], in
		}
	}
	return fence
}

// lineBreak is a line break as a chunk's text has them.
var lineBreak = regexp.MustCompile(`\r\n|\r|\n`)

// entryNumber opens an entry of a system or markdown injection.
var entryNumber = regexp.MustCompile(`^\d+\. `)

// checkInjectedChunk finds d's entry in injection (format system or
// markdown; d of several lines) and holds each of its lines to d's: the
// entry's lines after its first indented under it, each at its line's
// own indentation (tabs as four spaces), the same text but for
// escaping, white space runs and brackets, blank lines dropped, fenced
// code with no escape, its blank lines and its spacing inside its lines
// kept, and its fences balanced.
func checkInjectedChunk(t *testing.T, format, injection string, d events.DocumentChunk) {
	t.Helper()
	var want []string // d's lines as the injection keeps them; "" a blank line of code
	inFence := ""
	for _, l := range lineBreak.Split(d.Text, -1) {
		rest := strings.TrimLeft(l, " \t")
		switch {
		case strings.TrimSpace(l) == "":
			if inFence != "" {
				want = append(want, "")
			}
			continue
		case inFence != "":
			if strings.HasPrefix(rest, inFence) && strings.Trim(strings.TrimSpace(rest), inFence[:1]) == "" {
				inFence = ""
			}
		case strings.HasPrefix(rest, "```") || strings.HasPrefix(rest, "~~~"):
			inFence = rest[:len(rest)-len(strings.TrimLeft(rest, rest[:1]))]
		}
		want = append(want, l)
	}
	if len(want) < 2 {
		return // one line: written on its entry's line as prose
	}
	lines := strings.Split(injection, "\n")
	last := fmt.Sprintf("(source: [%d] ", d.Citation)
	if format == events.FormatMarkdown {
		last = fmt.Sprintf("[%d] _Relevance ", d.Citation)
	}
	end := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimLeft(l, " "), last) })
	if end < len(want) {
		t.Errorf("%s: no entry of %d lines ending %q for %s chunk %d in:\n%s", format, len(want), last, d.Source, d.ChunkIndex, injection)
		return
	}
	entry := slices.Clone(lines[end-len(want) : end])
	number := entryNumber.FindString(entry[0])
	if number == "" {
		t.Errorf("%s: %s chunk %d's entry does not open with its number: %q (lines %q)", format, d.Source, d.ChunkIndex, entry[0], want)
		return
	}
	indent := strings.Repeat(" ", len(number))
	entry[0] = indent + entry[0][len(number):]
	fence, open := "", 0
	for i, l := range want {
		got, ok := strings.CutPrefix(entry[i], indent)
		rest := strings.TrimLeft(l, " \t")
		lead := strings.ReplaceAll(l[:len(l)-len(rest)], "\t", "    ")
		if !ok || !strings.HasPrefix(got, lead) || strings.HasPrefix(got[len(lead):], " ") {
			t.Errorf("%s: %s chunk %d's line %q is injected as %q: not at its indentation %q under the entry", format, d.Source, d.ChunkIndex, l, entry[i], lead)
			continue
		}
		got = got[len(lead):]
		if normalized(got) != normalized(rest) {
			t.Errorf("%s: %s chunk %d's line %q is injected as %q", format, d.Source, d.ChunkIndex, l, entry[i])
		}
		in := len(l) - len(strings.TrimLeft(l, " "))
		code := fence != ""
		switch {
		case fence != "":
			if in <= open+3 && strings.HasPrefix(rest, fence) && strings.Trim(strings.TrimSpace(rest), fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(rest, "```") || strings.HasPrefix(rest, "~~~"):
			fence, open, code = rest[:len(rest)-len(strings.TrimLeft(rest, rest[:1]))], in, true
		}
		if code && strings.Count(got, `\`) != strings.Count(rest, `\`) {
			t.Errorf("%s: %s chunk %d's code line %q is escaped: %q", format, d.Source, d.ChunkIndex, l, entry[i])
		}
		if code && strings.TrimRight(strings.ReplaceAll(got, `\`, ""), " \t") != strings.TrimRight(strings.ReplaceAll(rest, `\`, ""), " \t") &&
			!strings.ContainsAny(rest, "[]") {
			t.Errorf("%s: %s chunk %d's code line %q is injected as %q: its spacing changed", format, d.Source, d.ChunkIndex, l, entry[i])
		}
	}
	if f := openFenceOf(entry); f != "" {
		t.Errorf("%s: %s chunk %d's entry leaves the fence %q open:\n%s", format, d.Source, d.ChunkIndex, f, strings.Join(entry, "\n"))
	}
}

// normalized is s without white space and backslashes, its square
// brackets as parentheses: what an injection keeps of a line whatever
// it escapes.
func normalized(s string) string {
	return strings.NewReplacer("[", "(", "]", ")", `\`, "").Replace(strings.Join(strings.Fields(s), ""))
}
