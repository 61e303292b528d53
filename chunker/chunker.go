// Package chunker cuts a document (plain text or Markdown, or source
// code: see Config.Code) into chunks for retrieval: pieces small enough to
// rank and inject, each understandable out of context.
//
// Structure comes first. A chunk never spans a Markdown heading, and each
// carries its heading path ("Install > Linux"): out of context, that path is
// what says what a chunk is about. Inside a section, chunks are cut between
// blocks (paragraphs, lists, fenced code) where one fits, else between
// sentences (also after 。！？), else between lines of code, else between
// words, and only a word longer than a chunk is cut inside. A fenced code
// block or a table that fits is never cut, nor does an overlap start
// inside one, or inside a line of one that is cut. A line indented four
// columns or more (a tab is to the next multiple of four) past its
// container opens no fence and is no heading, as in CommonMark: the
// container is the margin, or the text of the list item the line is
// under, so that a fence indented under a list item ("1. Tag:" then
// "    ```shell") opens a code block, which a line left of the item's text
// closes with the item. Consecutive chunks of one section overlap
// by up to Config.Overlap tokens of whole sentences (whole words when the
// last sentence is longer), so that a fact stated across a cut is whole in
// one of them.
//
// Every chunk's text is a slice of the source (Chunk.Start, Chunk.End), so a
// citation can point into the document; heading lines are not in any chunk's
// text, only in Headings. A chunk starting a line starts at the line's
// start, its indentation included, so that its first line is indented as
// in the document, as its other lines are; it is otherwise trimmed. Every
// other non-blank byte of the source is in at least one chunk. One
// exception: a fenced code block or a table longer
// than a chunk is cut between lines or rows, and a chunk starting inside
// one opens with the fence's line (indentation and info string included)
// or the table's header and delimiter rows (also when its overlap would
// start on the delimiter row: it starts after it), and one ending inside
// a code block closes its fence, so that each piece reads as code or as
// a table; the slice is
// then inside the text. Such a section's chunks are packed smaller by what
// they repeat, so no chunk exceeds Config.MaxTokens. A source code
// document (Config.Code) has no headings or blocks of Markdown: it is cut
// between lines, each chunk's slice between fence lines naming its
// language, and headed by the top-level declaration it is about (a
// function's, a class's, an INI section's name), if any.
package chunker

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Defaults of Config.
const (
	// DefaultMaxTokens is Config.MaxTokens's default: about 800 characters
	// of English.
	DefaultMaxTokens = 200
	// DefaultOverlap is Config.Overlap's default: about 120 characters of
	// English.
	DefaultOverlap = 30
	// MinMaxTokens and MaxMaxTokens bound Config.MaxTokens.
	MinMaxTokens = 16
	MaxMaxTokens = 8192
)

// Config is how a document is cut.
type Config struct {
	// MaxTokens is the largest a chunk may be, in Tokens. Default 200; in
	// MinMaxTokens..MaxMaxTokens.
	MaxTokens int
	// Overlap is the most tokens a chunk repeats of the end of the chunk
	// before it in the same section. Default 30 (when MaxTokens is also
	// defaulted; set a negative value for none); at most MaxTokens/2.
	Overlap int
	// Code is the language of a source code document ("go", "python";
	// see CodeLanguage), "" for Markdown or plain text. Code is cut
	// between lines, at blank lines where one leaves a chunk at least
	// half full, with an overlap of whole lines, and has no Markdown
	// headings: a chunk is headed by its top-level declaration's name
	// at most (see codeHeadings); each chunk is fenced with Code as the
	// info string ("```go"), so that it reads, and is injected, as
	// code: the source's text between the fence lines.
	Code string
}

// WithDefaults fills the fields left zero.
func (c Config) WithDefaults() Config {
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Overlap == 0 {
		c.Overlap = min(DefaultOverlap, c.MaxTokens/2)
	}
	if c.Overlap < 0 {
		c.Overlap = 0
	}
	return c
}

// Validate names the field that is out of range.
func (c Config) Validate() error {
	if c.MaxTokens < MinMaxTokens || c.MaxTokens > MaxMaxTokens {
		return fmt.Errorf("chunker: max tokens %d is not in %d..%d", c.MaxTokens, MinMaxTokens, MaxMaxTokens)
	}
	if c.Overlap < 0 || c.Overlap > c.MaxTokens/2 {
		return fmt.Errorf("chunker: overlap %d is not in 0..%d (half of max tokens)", c.Overlap, c.MaxTokens/2)
	}
	if !infoString.MatchString(c.Code) {
		return fmt.Errorf("chunker: code language %q is not a word of at most 32 letters, digits, '+', '#', '.' or '-'", c.Code)
	}
	return nil
}

// infoString is what Config.Code may be: one word, which a fence's info
// string can hold.
var infoString = regexp.MustCompile(`^[A-Za-z0-9+#.-]{0,32}$`)

// Chunk is one piece of a document.
type Chunk struct {
	// Index is the chunk's position in the document, from 0.
	Index int
	// Headings is the heading path the chunk is under, outermost first;
	// empty before the first heading.
	Headings []string
	// Start and End are the chunk's byte offsets in the source: Text is
	// source[Start:End], or holds it between the lines a continued block
	// repeats, or a code document's fence lines (Config.Code).
	Start, End int
	Text       string
	// Tokens is Tokens(Text).
	Tokens int
}

// ErrNotText is Split's error for a source that is not UTF-8 text.
var ErrNotText = errors.New("chunker: document is not UTF-8 text")

// Split cuts src into chunks (see the package documentation). cfg is
// defaulted and validated. A document of headings, front matter and
// blank lines only has no chunk (docs.put refuses it; see HasText).
func Split(src string, cfg Config) ([]Chunk, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !utf8.ValidString(src) || strings.IndexByte(src, 0) >= 0 {
		return nil, ErrNotText
	}
	if cfg.Code != "" {
		return splitCode(src, cfg), nil
	}
	var chunks []Chunk
	for _, sec := range sections(src) {
		// A section with a code block or table longer than a chunk is
		// packed smaller by what a chunk continuing one repeats (see
		// continued).
		c := cfg
		c.MaxTokens -= continuing(src, sec.blocks, cfg.MaxTokens)
		segs := segments(src, sec.blocks, c.MaxTokens)
		// The chunks' starts grow: the blocks ending before one's start
		// end before the next ones' too, so each chunk looks at the
		// blocks from the first it may overlap (a section of many short
		// code blocks cost time quadratic in them).
		k := 0
		for _, sp := range pack(src, segs, c) {
			for k < len(sec.blocks) && sec.blocks[k].e <= sp.s {
				k++
			}
			sp.s = afterHead(src, sec.blocks[k:], sp, cfg.MaxTokens, c.MaxTokens)
			text := continued(src, sec.blocks[k:], sp, cfg.MaxTokens, c.MaxTokens)
			chunks = append(chunks, Chunk{Index: len(chunks), Headings: sec.headings,
				Start: sp.s, End: sp.e, Text: text, Tokens: Tokens(text)})
		}
	}
	return chunks, nil
}

// HasText reports whether Split cuts src into any chunk: whether src has
// text outside its headings, YAML front matter and blank lines. It costs
// what reading src's lines does, not what chunking does, so that a
// document chunked later (docs.put's job) is refused at once when it
// would have no chunk.
func HasText(src string) bool {
	return len(sections(src)) > 0
}

// continues reports whether a chunk cut inside b repeats b's head: b is
// a code block or table longer than limit (what its section's chunks are
// packed to) whose head (with a closing fence) takes at most a third of
// max, the chunk size. A fence's line or a header row was
// only in the block's first chunk: the later ones started mid-code, a
// "//" or "#" comment read as prose, or with rows whose columns nothing
// named (a walk with real documents).
func continues(src string, b block, max, limit int) bool {
	return b.head > 0 && Tokens(src[b.s:b.e]) > limit && headTokens(src, b) <= max/3
}

// headTokens counts what a chunk continuing b adds: b's head and a line
// break, and a code block's line break and closing fence.
func headTokens(src string, b block) int {
	if b.head == 0 {
		return 0
	}
	n := Tokens(src[b.s:b.head]) + 1
	if b.code {
		n += Tokens(b.fence) + 1
	}
	return n
}

// continuing is the most tokens a chunk of blocks repeats: of the blocks
// that do not fit a chunk with their head (continues). Packed to size less
// that, a block that then does not fit has a smaller head.
func continuing(src string, blocks []block, size int) int {
	n := 0
	for _, b := range blocks {
		if h := headTokens(src, b); continues(src, b, size, size-h) {
			n = max(n, h)
		}
	}
	return n
}

// afterHead is where the chunk at sp starts: an overlap starting inside
// the head of a block that continues (a table's delimiter row) starts at
// the line after the head instead, which continued then opens with the
// whole head. Before, the chunk opened with the delimiter row and rows
// no header named (docs/performance.md's flood table).
func afterHead(src string, blocks []block, sp span, size, limit int) int {
	for _, b := range blocks {
		if b.s >= sp.e {
			break
		}
		if b.s < sp.s && sp.s < b.head && continues(src, b, size, limit) {
			if i := strings.IndexByte(src[b.head:sp.e], '\n'); i >= 0 {
				return b.head + i + 1
			}
		}
	}
	return sp.s
}

// continued is the text of the chunk at sp: the source, opening with the
// head of a block it starts inside of after that head (a code block's
// fence line with its info string, a table's header and delimiter rows),
// and closing a code block it ends inside of with its fence.
func continued(src string, blocks []block, sp span, size, limit int) string {
	text := src[sp.s:sp.e]
	for _, b := range blocks {
		if b.s >= sp.e {
			break // blocks are in order
		}
		if b.e <= sp.s || !continues(src, b, size, limit) {
			continue
		}
		if sp.s >= b.head && sp.s < b.e {
			text = src[b.s:b.head] + "\n" + text
		}
		if b.code && sp.e > b.s && sp.e < b.e {
			text += "\n" + b.fence
		}
	}
	return text
}

// Tokens estimates the tokens of s as chat models count them: a CJK
// character (Han, Hiragana, Katakana, Hangul) is a token, other text four
// UTF-8 bytes a token, rounded up (four characters of English, two of
// Greek, Cyrillic, Hebrew or Arabic: tokenizers cut those scripts finer);
// enrich's budget counts the same way.
func Tokens(s string) int { return count(s).tokens() }

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		r == '。' || r == '、' || r == '！' || r == '？' || r == '「' || r == '」')
}

// span is a byte range of the source.
type span struct{ s, e int }

// block is a paragraph (any run of non-blank lines: prose, a list, a
// table, a quote) or a fenced code block.
type block struct {
	span
	code bool
	// head ends what a chunk starting inside the block repeats: a code
	// block's opening fence line, a table's header and delimiter rows; 0
	// for other paragraphs.
	head int
	// fence closes a code block ("```", "~~~~"), indented as the line
	// opening it.
	fence string
}

// section is the blocks under one heading path.
type section struct {
	headings []string
	blocks   []block
}

// sections reads src's lines into blocks under their heading paths.
// Blocks start at their first line's start, its indentation included,
// so that a chunk repeating a block's head (continued) indents it as the
// block's other lines.
func sections(src string) []section {
	var (
		out   []section
		path  []string
		level []int
		cur   section
		para  = -1 // start of the open paragraph, -1 when none
		lines int  // lines in the open paragraph
		paraE int  // end of its last line
		fence string
		codeS int
		// base is the open fence's container column: 0, or the text
		// column of the list item it is in. codeE ends its last line.
		base, codeE int
		// items are the text columns of the open list items, innermost
		// last (listItem).
		items []int
	)
	closePara := func() {
		if para >= 0 {
			b := block{span: span{para, paraE}}
			b.head = tableHead(src, b.span)
			cur.blocks = append(cur.blocks, b)
			para = -1
		}
	}
	closeSection := func() {
		closePara()
		if len(cur.blocks) > 0 {
			out = append(out, cur)
		}
		cur = section{headings: titles(path)}
	}
	heading := func(lv int, title string) {
		closeSection()
		for len(level) > 0 && level[len(level)-1] >= lv {
			level, path = level[:len(level)-1], path[:len(path)-1]
		}
		level, path = append(level, lv), append(path, title)
		cur.headings = titles(path)
	}
	// leave closes the list items a line at column col is not inside of.
	leave := func(col int) {
		for len(items) > 0 && items[len(items)-1] > col {
			items = items[:len(items)-1]
		}
	}
	// A byte order mark (files saved on Windows) is not text: skipped,
	// so that a first line "\ufeff# Title" is the heading it reads as.
	// Offsets stay the source's.
	start := 0
	if strings.HasPrefix(src, "\ufeff") {
		start = len("\ufeff")
	}
	// YAML front matter (static site generators', GitHub's docs') is the
	// document's metadata, not a chunk: its title is the path's first
	// heading, as a "# Title" would be, and the rest is left out.
	if n, title := frontMatter(src[start:]); n > 0 {
		start += n
		if title != "" {
			heading(1, plainTitle(title))
		}
	}
	for pos := start; pos < len(src); {
		end := strings.IndexByte(src[pos:], '\n')
		next := len(src)
		if end < 0 {
			end = len(src)
		} else {
			end += pos
			next = end + 1
		}
		line := strings.TrimRight(src[pos:end], "\r")
		lineE := pos + len(line)
		trimmed := strings.TrimSpace(line)
		// col is the indentation's columns, a tab to the next multiple
		// of four (CommonMark): a line indented by a tab is indented
		// code, no fence or heading (a tab-indented shell example's "#
		// comment" was a heading of the chunks after it).
		col := columns(line)
		if fence != "" && base > 0 && trimmed != "" && col < base {
			// A line left of the list item's text ends the item, and
			// the code block in it, unclosed (CommonMark): read again.
			cur.blocks = append(cur.blocks, codeBlock(src, span{codeS, codeE}, fence))
			fence = ""
			continue
		}
		isFence := strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")
		if fence == "" && isFence {
			leave(col) // a fence is no lazy continuation line
		}
		// rel is the line's indentation past its container's: the list
		// item's text it is under, or the margin. A fence under a list
		// item is indented as the item's text (a release checklist's
		// "1. Tag:" then "    ```shell" was read as a paragraph).
		rel := col
		if fence != "" {
			rel = col - base
		} else if len(items) > 0 {
			rel = col - items[len(items)-1]
		}
		switch {
		case fence != "":
			if trimmed != "" {
				codeE = trim(src, span{pos, lineE}).e
			}
			if rel <= 3 && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				cur.blocks = append(cur.blocks, codeBlock(src, span{codeS, codeE}, fence))
				fence = ""
			}
		case rel >= 0 && rel <= 3 && isFence:
			closePara()
			c := trimmed[:1]
			fence = c + strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c))-1)
			t := trim(src, span{pos, lineE})
			codeS, codeE, base = lineStart(src, t.s), t.e, col-rel
		case trimmed == "":
			closePara()
		case col <= 3 && atxLevel(trimmed) > 0:
			leave(col)
			lv := atxLevel(trimmed)
			heading(lv, plainTitle(atxTitle(trimmed, lv)))
		case col <= 3 && para >= 0 && lines == 1 && setext(trimmed) > 0 && !listLine(src[para:paraE]):
			// Not under a list item, quote or table row: there "---" is a
			// thematic break and "===" a quote's lazy continuation line
			// (CommonMark), not an underline making the item a heading.
			title := plainTitle(strings.TrimSpace(src[para:paraE]))
			para = -1
			heading(setext(trimmed), title)
		default:
			if w := listItem(line); w > 0 && rel <= 3 {
				leave(col)
				items = append(items, w)
			} else if para < 0 {
				// Not a paragraph's lazy continuation line: a line left
				// of an item's text ends the item.
				leave(col)
			}
			if para < 0 {
				para, lines = lineStart(src, trim(src, span{pos, lineE}).s), 0
			}
			lines++
			paraE = lineE
		}
		pos = next
	}
	if fence != "" { // an unclosed fence runs to the end
		cur.blocks = append(cur.blocks, codeBlock(src, span{codeS, codeE}, fence))
	}
	closeSection()
	return out
}

// listItem is the column of a list item's text when line opens one
// ("- ", "* ", "+ ", "1. ", "1) "), else 0: the marker's column and
// width and the spaces after it, or one space when those are five or
// more, which open indented code (CommonMark).
func listItem(line string) int {
	col := columns(line)
	t := strings.TrimLeft(line, " \t")
	n := 0
	switch {
	case strings.HasPrefix(t, "- "), strings.HasPrefix(t, "* "), strings.HasPrefix(t, "+ "):
		n = 1
	default:
		for n < len(t) && n < 9 && t[n] >= '0' && t[n] <= '9' {
			n++
		}
		if n == 0 || n+1 >= len(t) || (t[n] != '.' && t[n] != ')') || t[n+1] != ' ' {
			return 0
		}
		n++
	}
	sp := len(t[n:]) - len(strings.TrimLeft(t[n:], " "))
	if sp > 4 || strings.TrimSpace(t[n:]) == "" {
		sp = 1
	}
	return col + n + sp
}

// columns is the width of line's indentation: a space one column, a tab
// to the next multiple of four.
func columns(line string) int {
	n := 0
	for _, c := range []byte(line) {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 4 - n%4
		default:
			return n
		}
	}
	return n
}

// codeBlock is the fenced code block at sp, opened and closed by fence.
func codeBlock(src string, sp span, fence string) block {
	head := sp.e
	if i := strings.IndexByte(src[sp.s:sp.e], '\n'); i >= 0 {
		head = sp.s + i
	}
	head = trim(src, span{sp.s, head}).e // without a "\r"
	line := src[sp.s:head]
	return block{span: sp, code: true, head: head, fence: line[:len(line)-len(strings.TrimLeft(line, " \t"))] + fence}
}

// tableDelimiter is a table's delimiter row ("|---|:--:|", "--- | ---").
var tableDelimiter = regexp.MustCompile(`^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$`)

// tableHead is where a table's delimiter row ends when the paragraph at
// sp opens with a table (a header row holding "|", then a delimiter row
// holding "|" or starting with one), else 0.
func tableHead(src string, sp span) int {
	first, rest, ok := strings.Cut(src[sp.s:sp.e], "\n")
	if !ok || !strings.Contains(first, "|") {
		return 0
	}
	second, _, _ := strings.Cut(rest, "\n")
	d := strings.TrimSpace(second)
	if !strings.Contains(d, "|") || !tableDelimiter.MatchString(d) {
		return 0
	}
	return trim(src, span{sp.s, sp.s + len(first) + 1 + len(second)}).e
}

// frontMatterKey is a YAML mapping line of front matter: "key:" and its
// value, or a list item or continuation (indented, "- ") under one.
var frontMatterKey = regexp.MustCompile(`^(?:[A-Za-z0-9_][A-Za-z0-9_ .-]*:(?:\s|$)|\s|-\s|#)`)

// frontMatter is the length of the YAML front matter src opens with (a
// "---" line, mapping lines, a "---" or "..." line, within 200 lines) and
// its title (the "title:" value, unquoted), or 0 when src opens with none:
// a "---" followed by anything else is Markdown's thematic break (a
// knowledge-base walk: 62 of 289 real documents had front matter, each
// its own chunk with no heading path).
func frontMatter(src string) (n int, title string) {
	first, rest, ok := strings.Cut(src, "\n")
	if !ok || strings.TrimRight(first, "\r") != "---" {
		return 0, ""
	}
	pos := len(first) + 1
	for range 200 {
		line, after, more := strings.Cut(rest, "\n")
		end := pos + len(line)
		if more {
			end++
		}
		l := strings.TrimRight(line, "\r")
		switch {
		case l == "---" || l == "...":
			return end, title
		case strings.TrimSpace(l) == "":
		case !frontMatterKey.MatchString(l):
			return 0, ""
		case strings.HasPrefix(l, "title:"):
			title = strings.Trim(strings.TrimSpace(strings.TrimPrefix(l, "title:")), `"'`)
		}
		if !more {
			return 0, ""
		}
		rest, pos = after, end
	}
	return 0, ""
}

// titles is a copy of a heading path without its empty titles: a heading
// line "#" alone closes the deeper sections as any heading of its level
// but names nothing, so it is no step of a path ("doc.md ›  › Deep").
func titles(path []string) []string {
	var out []string
	for _, t := range path {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// atxLevel is the level of an ATX heading line ("## Title"), 0 if it is
// not one.
func atxLevel(t string) int {
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n < 1 || n > 6 || (len(t) > n && t[n] != ' ' && t[n] != '\t') {
		return 0
	}
	return n
}

// atxTitle is an ATX heading's text, without its closing #s and without
// a trailing attribute block of Pandoc and kramdown ("## History
// {#history}", "{.unnumbered}"): markup, not title, which heading paths and
// citations showed (a walk with Go's own documents).
func atxTitle(t string, level int) string {
	t = strings.TrimSpace(t[level:])
	if u := strings.TrimRight(t, "#"); u == "" || strings.HasSuffix(u, " ") {
		t = strings.TrimSpace(u)
	}
	if i := strings.LastIndex(t, " {"); i > 0 && strings.HasSuffix(t, "}") && attributes(t[i+2:len(t)-1]) {
		t = strings.TrimSpace(t[:i])
	}
	return t
}

// Inline markup of a heading's title: images (badges), links (their text
// is kept), HTML tags, and emphasis wrapping the whole title.
var (
	titleImage = regexp.MustCompile(`!\[[^\]]*\]\([^)\s]*\)`)
	titleLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)\s]*\)`)
	titleTag   = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*(\s[^<>]*)?/?>`)
)

// plainTitle is a heading's title without its inline markup, as a heading
// path and a citation show it: "JetStream Simplified Client [![API
// Reference](https://pkg.go.dev/badge/….svg)](https://pkg.go.dev/…)" is
// "JetStream Simplified Client", "[pgxmock](https://github.com/…)"
// "pgxmock", "__Single fetch__" "Single fetch", `<a name="tls"></a>TLS`
// "TLS". Markup was indexed as the heading's words at a question's
// weight in every chunk under it (the badge's URL gave each chunk of a
// README a dozen heading words), and a citation repeated it (a walk with
// the Markdown of Go modules: 149 chunks of 10 documents). Code spans
// stay. A title that is markup only is kept as it is.
func plainTitle(t string) string {
	if !strings.ContainsAny(t, "[<_*") {
		return t
	}
	u := outsideCode(t, func(s string) string {
		s = titleImage.ReplaceAllString(s, "")
		s = titleLink.ReplaceAllString(s, "$1")
		return titleTag.ReplaceAllString(s, "")
	})
	u = strings.Join(strings.Fields(u), " ")
	for _, m := range []string{"**", "__", "*", "_"} {
		// Around the whole title only: "**Note** and **Warning**" is
		// two emphases, not one whose markers are the title's ends.
		if len(u) > 2*len(m) && strings.HasPrefix(u, m) && strings.HasSuffix(u, m) && !strings.Contains(u[len(m):len(u)-len(m)], m) {
			u = strings.TrimSpace(u[len(m) : len(u)-len(m)])
			break
		}
	}
	if u == "" {
		return t
	}
	return u
}

// outsideCode is s with f applied to its text outside code spans (a run
// of backticks to the next run of as many): "`Vec<T>`" keeps its "<T>",
// which outside a code span is an HTML tag. An unclosed run is text.
func outsideCode(s string, f func(string) string) string {
	if !strings.Contains(s, "`") {
		return f(s)
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '`')
		if open < 0 {
			break
		}
		n := open
		for n < len(s) && s[n] == '`' {
			n++
		}
		end := -1
		for j := n; j < len(s); {
			k := strings.IndexByte(s[j:], '`')
			if k < 0 {
				break
			}
			k += j
			m := k
			for m < len(s) && s[m] == '`' {
				m++
			}
			if m-k == n-open {
				end = m
				break
			}
			j = m
		}
		if end < 0 {
			break
		}
		b.WriteString(f(s[:open]))
		b.WriteString(s[open:end])
		s = s[end:]
	}
	b.WriteString(f(s))
	return b.String()
}

// attributes reports whether s, the inside of a heading's trailing braces,
// is an attribute list: words each starting with # (an id) or . (a class),
// or holding = (a key and value).
func attributes(s string) bool {
	ws := strings.Fields(s)
	for _, w := range ws {
		if !strings.HasPrefix(w, "#") && !strings.HasPrefix(w, ".") && !strings.Contains(w, "=") {
			return false
		}
	}
	return len(ws) > 0
}

// setext is the level of a setext underline ("===" 1, "---" 2), else 0.
func setext(t string) int {
	switch {
	case strings.Trim(t, "=") == "":
		return 1
	case len(t) >= 2 && strings.Trim(t, "-") == "":
		return 2
	}
	return 0
}

// segment is a unit chunks are cut between: a sentence, a line of code, a
// list item or table row, or a piece of one too long for a chunk. first
// marks a block's first segment (a better place to cut); code a code
// block or table kept whole, which an overlap must not start inside of
// (a code block's tail would open with its closing fence, which opens a
// fence there; a table's with rows no header names).
type segment struct {
	span
	first, code bool
}

// segments cuts blocks into segments of at most max tokens.
func segments(src string, blocks []block, max int) []segment {
	var out []segment
	for _, b := range blocks {
		var parts []span
		whole := b.code || b.head > 0 // a code block or a table
		switch {
		case whole && Tokens(src[b.s:b.e]) <= max:
			// Not cut: a table cut between rows, not continued
			// (continues), left a chunk of rows without its header.
			parts = []span{b.span}
		case b.code, b.head > 0 && Tokens(src[b.s:b.e]) > max:
			// A table too long for a chunk is cut between rows, as
			// code between lines.
			parts = lineSpans(src, b.span)
		default:
			parts = sentences(src, b.span)
		}
		// A line of a code block or a table row cut between lines is
		// whole too: an overlap starting inside one opened a chunk with
		// half a line of code.
		firstOfBlock, whole := true, whole && len(parts) == 1 || len(parts) > 1 && (b.code || b.head > 0)
		for _, p := range parts {
			p.s = lineStart(src, p.s)
			for _, q := range fit(src, p, max) {
				out = append(out, segment{span: q, first: firstOfBlock, code: whole})
				firstOfBlock = false
			}
		}
	}
	return out
}

// lineStart is the start of the line holding byte i when only its
// indentation (spaces and tabs) comes before i, else i: a segment, and so
// a chunk, starting a line starts with the line's indentation, as the
// lines after it keep theirs. Before, a chunk's first line lost it (a Go
// function's body cut between lines read from the margin, a nested list
// item read as one of the outer list).
func lineStart(src string, i int) int {
	j := i
	for j > 0 && (src[j-1] == ' ' || src[j-1] == '\t') {
		j--
	}
	if j == 0 || src[j-1] == '\n' || j == len("\ufeff") && strings.HasPrefix(src, "\ufeff") {
		return j
	}
	return i
}

// lineSpans cuts sp into its non-blank lines.
func lineSpans(src string, sp span) []span {
	var out []span
	for pos := sp.s; pos < sp.e; {
		end := strings.IndexByte(src[pos:sp.e], '\n')
		if end < 0 {
			end = sp.e
		} else {
			end += pos
		}
		if t := trim(src, span{pos, end}); t.e > t.s {
			out = append(out, t)
		}
		pos = end + 1
	}
	return out
}

// listLine reports whether a line starts a list item, table row or quote:
// such a line starts a segment of its own.
func listLine(l string) bool {
	l = strings.TrimLeft(l, " \t")
	switch {
	case l == "":
		return false
	case strings.HasPrefix(l, "- "), strings.HasPrefix(l, "* "), strings.HasPrefix(l, "+ "),
		strings.HasPrefix(l, "|"), strings.HasPrefix(l, ">"):
		return true
	}
	i := 0
	for i < len(l) && i < 9 && l[i] >= '0' && l[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(l) && (l[i] == '.' || l[i] == ')') && l[i+1] == ' '
}

// abbreviations do not end a sentence ("e.g. this", "Dr. Who").
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true, "vs": true, "etc": true,
	"e.g": true, "i.e": true, "cf": true, "no": true, "fig": true, "approx": true, "inc": true, "ltd": true, "jr": true, "sr": true,
}

// sentences cuts a paragraph span into sentences: after . ! ? (and closing
// quotes or brackets) followed by white space and not after an
// abbreviation, an initial or a number; after 。！？ always; and before a
// line that starts a list item, table row or quote.
func sentences(src string, sp span) []span {
	var out []span
	start := sp.s
	emit := func(e int) {
		if t := trim(src, span{start, e}); t.e > t.s {
			out = append(out, t)
		}
		start = e
	}
	text := src[sp.s:sp.e]
	// word is where the current word starts, lineWord where the current
	// line's first word does (-1 before it): kept as the scan goes, so that
	// deciding a period costs the word's length, not the text's.
	word, lineWord := 0, 0
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		at := sp.s + i
		switch {
		case r == '\n':
			if listLine(text[i+1:]) {
				emit(at + 1)
			}
		case r == '。' || r == '！' || r == '？':
			j := i + n
			for j < len(text) {
				c, m := utf8.DecodeRuneInString(text[j:])
				if !strings.ContainsRune(`"'”’」』)）`, c) {
					break
				}
				j += m
			}
			emit(sp.s + j)
			i, word = j, j
			continue
		case r == '.' || r == '!' || r == '?':
			j := i + n
			for j < len(text) && (text[j] == '.' || text[j] == '!' || text[j] == '?') {
				j++
			}
			for j < len(text) {
				c, m := utf8.DecodeRuneInString(text[j:])
				if !strings.ContainsRune(`"')]”’`, c) {
					break
				}
				j += m
			}
			if j >= len(text) || text[j] == ' ' || text[j] == '\n' || text[j] == '\t' {
				if r != '.' || sentenceEnd(text[word:i], word == lineWord) {
					emit(sp.s + j)
				}
				i = j
				continue
			}
		}
		if strings.ContainsRune(" \t\n(\"'", r) {
			word = i + n
			if r == '\n' {
				lineWord = -1
			}
		} else if lineWord < 0 {
			lineWord = word
		}
		i += n
	}
	emit(sp.e)
	return out
}

// sentenceEnd reports whether a period after the word w ends a sentence:
// not after an abbreviation, a single letter (an initial), or a number that
// starts its line (first: an ordered list's marker).
func sentenceEnd(w string, first bool) bool {
	if w == "" || len(w) > 9 {
		return true
	}
	if first && !strings.ContainsFunc(w, func(r rune) bool { return r < '0' || r > '9' }) {
		return false
	}
	if abbreviations[strings.ToLower(w)] {
		return false
	}
	r, n := utf8.DecodeRuneInString(w)
	return n != len(w) || !unicode.IsLetter(r)
}

// fit cuts sp, if it is over max tokens, at word starts (any CJK character
// or South-East Asian letter starts a word), and a word over max tokens at
// character boundaries.
func fit(src string, sp span, max int) []span {
	if Tokens(src[sp.s:sp.e]) <= max {
		return []span{sp}
	}
	var out []span
	start := sp.s
	for start < sp.e {
		// The longest prefix of src[start:sp.e] within max that ends
		// before a word start; else the longest within max at all.
		lastWord, lastRune := -1, -1
		toks := tokenCounter{}
		for i := start; i < sp.e; {
			r, n := utf8.DecodeRuneInString(src[i:])
			if i > start && wordStart(src, i) {
				// A word opening an indented line is cut before the
				// indentation, which the next piece keeps.
				if ls := lineStart(src, i); ls > start {
					lastWord = ls
				}
			}
			if !toks.add(r, max) {
				break
			}
			i += n
			lastRune = i
		}
		if lastRune >= sp.e {
			lastWord = sp.e
		}
		end := lastWord
		if end <= start {
			end = lastRune
		}
		if t := trim(src, span{start, end}); t.e > t.s {
			t.s = lineStart(src, t.s)
			out = append(out, t)
		}
		start = end
	}
	return out
}

// tokenCounter counts Tokens incrementally.
type tokenCounter struct{ cjk, other int }

// count counts the tokens of s.
func count(s string) tokenCounter {
	var c tokenCounter
	for _, r := range s {
		c.addRune(r)
	}
	return c
}

func (c *tokenCounter) addRune(r rune) {
	if isCJK(r) {
		c.cjk++
	} else {
		c.other += utf8.RuneLen(r)
	}
}

// add adds r if the total stays within max, and reports whether it did.
func (c *tokenCounter) add(r rune, max int) bool {
	d := *c
	d.addRune(r)
	if d.tokens() > max {
		return false
	}
	*c = d
	return true
}

func (c tokenCounter) plus(d tokenCounter) tokenCounter {
	return tokenCounter{c.cjk + d.cjk, c.other + d.other}
}

func (c tokenCounter) minus(d tokenCounter) tokenCounter {
	return tokenCounter{c.cjk - d.cjk, c.other - d.other}
}

func (c tokenCounter) tokens() int { return c.cjk + (c.other+3)/4 }

// wordStart reports whether a word starts at byte i of src: a non-space
// after a space, a CJK character, or a letter of a South-East Asian script
// written without spaces (Thai, Lao, Khmer, Myanmar), so that a long run
// of those is cut between letters, never between a letter and its marks.
func wordStart(src string, i int) bool {
	r, _ := utf8.DecodeRuneInString(src[i:])
	if unicode.IsSpace(r) {
		return false
	}
	if isCJK(r) || isSEALetter(r) {
		return true
	}
	p, _ := utf8.DecodeLastRuneInString(src[:i])
	return unicode.IsSpace(p) || isCJK(p)
}

// isSEALetter reports whether r is a letter of Thai, Lao, Khmer or Myanmar
// (their combining marks belong to the letter before them).
func isSEALetter(r rune) bool {
	return r >= 0x0e01 && unicode.IsLetter(r) && unicode.In(r, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}

// trim narrows sp to exclude surrounding white space.
func trim(src string, sp span) span {
	for sp.s < sp.e {
		r, n := utf8.DecodeRuneInString(src[sp.s:])
		if !unicode.IsSpace(r) {
			break
		}
		sp.s += n
	}
	for sp.e > sp.s {
		r, n := utf8.DecodeLastRuneInString(src[:sp.e])
		if !unicode.IsSpace(r) {
			break
		}
		sp.e -= n
	}
	return sp
}

// pack groups a section's segments into chunks of at most cfg.MaxTokens,
// cutting at a block boundary when one leaves the chunk at least half full,
// and starting each chunk after the first with the overlap. Token counts
// come from running totals at segment boundaries, so that a section costs
// time linear in its length whatever the chunk size.
func pack(src string, segs []segment, cfg Config) []span {
	if len(segs) == 0 {
		return nil
	}
	// at[k] counts src[segs[0].s:segs[k].s], upto[k] src[segs[0].s:segs[k].e].
	at, upto := make([]tokenCounter, len(segs)), make([]tokenCounter, len(segs))
	var run tokenCounter
	for k, sg := range segs {
		if k > 0 {
			run = run.plus(count(src[segs[k-1].e:sg.s]))
		}
		at[k] = run
		run = run.plus(count(src[sg.s:sg.e]))
		upto[k] = run
	}
	var out []span
	for i := 0; i < len(segs); {
		start, lead := segs[i].s, tokenCounter{} // lead counts src[start:segs[i].s]
		if len(out) > 0 {
			start, lead = overlapStart(src, segs, i, out[len(out)-1], at, upto, cfg)
		}
		size := func(k int) int { return lead.plus(upto[k].minus(at[i])).tokens() } // src[start:segs[k].e]
		j := i
		for j+1 < len(segs) && size(j+1) <= cfg.MaxTokens {
			j++
		}
		if j+1 < len(segs) && !segs[j+1].first {
			for k := j; k > i; k-- {
				if segs[k].first && size(k-1) >= cfg.MaxTokens/2 {
					j = k - 1
					break
				}
			}
		}
		out = append(out, span{start, segs[j].e})
		i = j + 1
	}
	return out
}

// overlapStart is where the chunk starting at segment i begins, and the
// tokens from there to segment i: in the previous chunk prev, at the
// earliest segment (else word) start whose tail of prev is within
// cfg.Overlap tokens and leaves room for segment i; at segment i itself
// when there is none. It looks back from prev's end only as far as the
// overlap reaches.
func overlapStart(src string, segs []segment, i int, prev span, at, upto []tokenCounter, cfg Config) (int, tokenCounter) {
	own := segs[i].s
	if cfg.Overlap == 0 {
		return own, tokenCounter{}
	}
	// gap counts src[prev.e:segs[i].s]; the segments before i end at
	// prev.e or earlier.
	gap := at[i].minus(upto[i-1])
	if segs[i-1].e != prev.e {
		return own, tokenCounter{}
	}
	seg := upto[i].minus(at[i])
	fits := func(p int, tail tokenCounter) bool {
		return p > prev.s && tail.tokens() <= cfg.Overlap && tail.plus(gap).plus(seg).tokens() <= cfg.MaxTokens
	}
	best, lead := own, tokenCounter{}
	for k := i - 1; k >= 0 && segs[k].s > prev.s; k-- {
		tail := upto[i-1].minus(at[k])
		if !fits(segs[k].s, tail) {
			break
		}
		best, lead = segs[k].s, tail.plus(gap)
	}
	if best != own || segs[i-1].code {
		return best, lead
	}
	// The last sentence alone is longer than the overlap: whole words,
	// counted back from prev's end. A word opening an indented line
	// starts the overlap with its indentation, or not at all.
	var tail tokenCounter
	for p := prev.e; p > prev.s; {
		r, n := utf8.DecodeLastRuneInString(src[:p])
		if !tail.add(r, cfg.Overlap) {
			break
		}
		p -= n
		if (wordStart(src, p) && lineStart(src, p) == p || p > 0 && src[p-1] == '\n' && lineStart(src, p+1) == p) && fits(p, tail) {
			best, lead = p, tail.plus(gap)
		}
	}
	return best, lead
}
