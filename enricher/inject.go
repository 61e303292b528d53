package enricher

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// estimateTokens estimates the tokens of s at four UTF-8 bytes a token,
// rounded up: four characters of ASCII, the usual rule of thumb for
// English with OpenAI-style tokenizers; two of Greek, Cyrillic, Hebrew or
// Arabic and one and a third of Thai or Devanagari, which those
// tokenizers cut far finer than English (o200k 0.3 to 0.45 tokens a
// character, cl100k 0.5 to 1, measured: at four characters a token, a
// Thai, Greek or Hebrew injection was 1.5 times its budget in o200k tokens
// and 3.5 to 4 times in cl100k's). A CJK character (Han, kana, Hangul)
// counts a token of its own: those tokenizers give Japanese and Chinese
// text 0.7 to 1 token a character, so at four a token a budget let
// through three to four times its tokens.
func estimateTokens(s string) int {
	return countText(s).tokens()
}

// textCount is what estimateTokens counts of a text: the UTF-8 bytes
// counted four to a token (n) and the characters counted one a token
// (cjk). Counts add up over concatenated texts, which estimates do not
// (rounding).
type textCount struct{ n, cjk int }

func (c textCount) tokens() int { return (c.n+3)/4 + c.cjk }

func (c textCount) plus(d textCount) textCount { return textCount{c.n + d.n, c.cjk + d.cjk} }

// countText counts s for estimateTokens. ASCII is counted a byte at a
// time: stored turns are mostly ASCII, and an injection reads each of
// their characters several times.
func countText(s string) textCount {
	var c textCount
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			c.n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if isCJK(r) {
			c.cjk++
		} else {
			c.n += size // an invalid byte counts one
		}
	}
	return c
}

// neutralize makes stored text safe to place inside an injection: square
// brackets become parentheses, so no text can open a "[facts:" or "[context:"
// block or close one early, and runs of white space (line breaks included)
// and control characters become one space, so no text can start a line
// that reads as a new item, turn or heading. The control characters are
// C0's, DEL and C1's: Python's str.splitlines breaks lines at U+001C..U+001E
// as at U+0085, and the escape sequences of ESC (U+001B) and CSI (U+009B)
// rewrite the terminal that prints an injection (memoryd enrich). Invalid
// UTF-8 becomes U+FFFD, a byte at a time.
func neutralize(s string) string { return neutralizeKeeping(s, false) }

// neutralizeKeeping is neutralize, keeping square brackets when brackets
// is set: a document chunk's text for its fenced code (escapeChunk).
func neutralizeKeeping(s string, brackets bool) string {
	s = breakControlTokens(s)
	b := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf { // ASCII a byte at a time (see countText)
			i++
			switch {
			case c <= ' ' || c == 0x7f: // white space and control characters
				space = true
				continue
			case c == '[' && !brackets:
				c = '('
			case c == ']' && !brackets:
				c = ')'
			}
			if space && len(b) > 0 {
				b = append(b, ' ')
			}
			space = false
			b = append(b, c)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			i += size
			continue
		}
		if space && len(b) > 0 {
			b = append(b, ' ')
		}
		space = false
		b = utf8.AppendRune(b, r) // U+FFFD for an invalid byte (size 1)
		i += size
	}
	return string(b)
}

// controlTokens are the chat templates' control tokens as text: "<|"
// opens those of ChatML, Llama 3, Phi and others ("<|im_start|>",
// "<|eot_id|>"), the rest are Llama's, Mistral's and Gemma's. A model
// server that reads special tokens in message text (llama.cpp, Ollama and
// vLLM can) would take one in a stored turn for the end of the message and
// the start of another, e.g. a system message of the stored text's choosing.
var controlTokens = strings.NewReplacer(
	"<|", "< |", "|>", "| >",
	"<s>", "< s>", "</s>", "< /s>",
	"<start_of_turn>", "< start_of_turn>", "<end_of_turn>", "< end_of_turn>",
	"<bos>", "< bos>", "<eos>", "< eos>", // Gemma's
	// DeepSeek's (V3, R1) write their bars full width: "<｜User｜>",
	// "<｜end▁of▁sentence｜>".
	"<｜", "< ｜", "｜>", "｜ >",
)

// breakControlTokens puts a space into each control token s holds (see
// controlTokens), so that no tokenizer reads it as one; the rest of s is
// kept as it is (HTML and code keep their other tags).
func breakControlTokens(s string) string {
	if !strings.Contains(s, "<") && !strings.Contains(s, "|>") && !strings.Contains(s, "｜>") {
		return s
	}
	return controlTokens.Replace(s)
}

// escape puts a backslash before each backslash and each rune of special in
// s: the separators of a format, which stored text must not be able to
// write (see docs/protocol.md, "Injection formats").
func escape(s, special string) string {
	if !strings.ContainsAny(s, special+`\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if r == '\\' || strings.ContainsRune(special, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The runes escaped in each format's stored text. Inline: "," and "=" would
// start a fact or a value, "|" a context item. System: ":" would end a key,
// or start an answer or a source. Markdown: "*" would end a bold key, "_" an
// italic source (a fact's, or an item's line). No stored text holds a line
// break or a square bracket (see neutralize), so none can start a line or a
// block.
//
// A source's turn and conversation ids also escape ",", which separates
// the turn, the conversation and the date ("turn e1, conversation c1,
// 2026-11-21"); a citation's source and headings escape "›", which
// separates the source and each heading ("handbook.md › Keys, chunk 3"),
// and in inline also ":", which ends the citation before the chunk's text.
const (
	inlineFactSpecial = ",="
	inlineItemSpecial = "|"
	systemSpecial     = ":"
	markdownSpecial   = "*_"
	sourceSpecial     = ","
	citeSpecial       = "›"
	inlineCiteSpecial = inlineItemSpecial + ":"
)

// The indentation of a document chunk's lines after its first (see
// indentLines): under the entry's text in system ("1. "), two spaces in
// inline, whose items have no marker.
const (
	systemIndent = "   "
	inlineIndent = "  "
)

// cleanFact and cleanItem are the neutralized texts an injection is built of.
type cleanFact struct {
	key, value    string
	eventID, conv string // "" when absent
	date          string // of the value's source time
	// size counts key and value, which every format renders whole.
	size textCount
}

// source says where a fact's value came from, its texts escaped with
// special (a format's, with sourceSpecial): the turn that stated it, or "set directly" (facts.set), and when
// it was stated, not when it was written, so that a model weighing two
// statements sees their own dates.
func (f cleanFact) source(special string) string {
	src := "set directly"
	if f.eventID != "" {
		src = "turn " + escape(f.eventID, special)
	}
	if f.conv != "" {
		src += ", conversation " + escape(f.conv, special)
	}
	return src + ", " + f.date
}

type cleanItem struct {
	question, answer string
	eventID, conv    string // "" when absent
	date             string
	score            float64
	// size counts question and answer, which every format renders whole.
	size textCount
}

// source says where an item came from, its texts escaped with special (a
// format's, with sourceSpecial).
func (it cleanItem) source(special string) string {
	src := "stored directly"
	if it.eventID != "" {
		src = "turn " + escape(it.eventID, special)
	}
	if it.conv != "" {
		src += ", conversation " + escape(it.conv, special)
	}
	return src + ", " + it.date
}

// sourceDate is the day of t in loc (YYYY-MM-DD), a source's date.
func sourceDate(t time.Time, loc *time.Location) string { return t.In(loc).Format("2006-01-02") }

// datesIn is where a reply's source dates are days: at's UTC offset, as
// the time expressions of the message are read (ParseTime), UTC when at
// is zero (absent) or in UTC. A fixed offset, not at's location: Go reads
// an offset the host's zone uses as that zone (time.Parse), whose offset
// differs on another date (summer time).
func datesIn(at time.Time) *time.Location {
	if at.IsZero() {
		return time.UTC
	}
	_, off := at.Zone()
	if off == 0 {
		return time.UTC
	}
	return time.FixedZone("", off)
}

func cleanFacts(facts []events.Fact, loc *time.Location) []cleanFact {
	out := make([]cleanFact, len(facts))
	for i, f := range facts {
		at := f.SourceAt
		if at.IsZero() { // a fact from an older memoryd's reply
			at = f.UpdatedAt
		}
		out[i] = cleanFact{
			key:     neutralize(f.Key),
			value:   neutralize(f.Value),
			eventID: neutralize(f.EventID),
			conv:    neutralize(f.ConversationID),
			date:    sourceDate(at, loc),
		}
		out[i].size = countText(out[i].key).plus(countText(out[i].value))
	}
	return out
}

func cleanItems(items []events.ContextItem, loc *time.Location) []cleanItem {
	out := make([]cleanItem, len(items))
	for i, it := range items {
		out[i] = cleanOne(it, loc)
	}
	return out
}

func cleanOne(it events.ContextItem, loc *time.Location) cleanItem {
	c := cleanItem{
		question: neutralize(it.Question),
		answer:   neutralize(it.Answer),
		eventID:  neutralize(it.EventID),
		conv:     neutralize(it.ConversationID),
		date:     sourceDate(it.CreatedAt, loc),
		score:    it.Score,
	}
	c.size = countText(c.question).plus(countText(c.answer))
	return c
}

// cleanCache holds the clean texts of one reply's items by id, so that a
// reply built again (reserves read, a budget lowered to fit the payload)
// cleans each item once: on real conversations, cleaning the same
// kilobytes again was most of injecting. Its zero value (nil) caches
// nothing.
type cleanCache map[int64]cleanItem

// item is it cleaned, its date a day in loc: one reply's items, so one loc.
func (c cleanCache) item(it events.ContextItem, loc *time.Location) cleanItem {
	if ci, ok := c[it.ID]; ok && it.ID != 0 {
		return ci
	}
	ci := cleanOne(it, loc)
	if c != nil && it.ID != 0 {
		c[it.ID] = ci
	}
	return ci
}

// cleanChunk is a document chunk's neutralized text and citation.
type cleanChunk struct {
	text, source string
	// written is text with its square brackets, escapeChunk's input:
	// system and markdown keep them in fenced code.
	written  string
	headings []string
	index    int
	score    float64
	// size counts text and source, which every format renders whole.
	size textCount
}

// cite is the chunk's citation, its texts escaped with special (a
// format's, with citeSpecial): "source › heading › subheading, chunk N" (N from 0, as in
// the reply's chunk_index).
func (c cleanChunk) cite(special string) string {
	var b strings.Builder
	b.WriteString(escape(c.source, special))
	for _, h := range c.headings {
		b.WriteString(" › ")
		b.WriteString(escape(h, special))
	}
	fmt.Fprintf(&b, ", chunk %d", c.index)
	return b.String()
}

// neutralizeLines is neutralize keeping s's line breaks ("\n", "\r\n",
// "\r") and each line's indentation (a tab as four spaces): a document
// chunk's code, tables and lists read as written, where one line let a
// "//" comment swallow the code after it. Blank lines go, so that a
// chunk's lines are one run the formats indent under its entry (see
// indentLines), but in fenced code (fenceLines), which keeps them and,
// inside its lines, its runs of spaces and tabs (neutralizeCode): a
// Python module's blank lines between definitions and its aligned
// values, a Go struct's columns. Other line breaks (U+2028, U+0085, form
// feed) still become a space.
func neutralizeLines(s string) string { return neutralizeLinesKeeping(s, false) }

// neutralizeLinesKeeping is neutralizeLines, keeping square brackets when
// brackets is set (escapeChunk's input).
func neutralizeLinesKeeping(s string, brackets bool) string {
	if !strings.ContainsAny(s, "\n\r") {
		return neutralizeKeeping(s, brackets)
	}
	raw := splitLines(s)
	fenced := strings.Contains(s, "```") || strings.Contains(s, "~~~")
	lines := make([]string, len(raw))
	for i, line := range raw {
		// With fences, each line as fenced code keeps it (neutralizeCode);
		// the fences are read on those lines as on neutralize's, which
		// differ only in runs of spaces inside lines.
		ind, rest := indentation(line), strings.TrimLeft(line, " \t")
		text := ""
		if fenced {
			text = neutralizeCode(rest, brackets, len(ind))
		} else {
			text = neutralizeKeeping(rest, brackets)
		}
		if text != "" {
			lines[i] = ind + text
		}
	}
	var code []bool
	if fenced {
		code = fenceLines(lines)
	}
	var b strings.Builder
	b.Grow(len(s))
	first := true
	for i, line := range lines {
		inCode := code != nil && code[i]
		if line == "" && !inCode {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		if fenced && !inCode {
			// Prose: its runs of white space one space, as neutralize
			// writes them.
			text := strings.TrimLeft(line, " ")
			line = line[:len(line)-len(text)] + collapseSpaces(text)
		}
		b.WriteString(line)
	}
	return b.String()
}

// collapseSpaces is s with each run of spaces one space: a line of
// neutralizeCode's as neutralize writes it (a run of white space there
// is spaces).
func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// splitLines cuts s at its line breaks, "\n", "\r\n" and a lone "\r",
// keeping its blank lines; no line after a last line break.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

// indentation is line's leading spaces and tabs, a tab as four spaces.
func indentation(line string) string {
	ind := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	if !strings.Contains(ind, "\t") {
		return ind
	}
	return strings.ReplaceAll(ind, "\t", "    ")
}

// neutralizeCode is neutralizeKeeping for a line of fenced code after its
// indentation, which ends at column col: a run of white space and control
// characters inside it is kept when it is of spaces and tabs only
// (alignment), a tab as spaces to the next multiple of four columns (a
// character a column), one space otherwise, as neutralize writes it;
// none at its ends. No run of spaces starts a line or closes a block,
// and the injection holds no tab, a control character.
func neutralizeCode(s string, brackets bool, col int) string {
	s = breakControlTokens(s)
	b := make([]byte, 0, len(s))
	run, plain := -1, true // the pending run's start; whether it is of spaces and tabs only
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if r < utf8.RuneSelf && (r <= ' ' || r == 0x7f) || r >= utf8.RuneSelf && (unicode.IsSpace(r) || unicode.IsControl(r)) {
			if run < 0 {
				run, plain = i, true
			}
			plain = plain && (r == ' ' || r == '\t')
			i += size
			continue
		}
		if run >= 0 && len(b) > 0 {
			if !plain {
				b, col = append(b, ' '), col+1
			}
			for k := run; plain && k < i; k++ {
				n := 1
				if s[k] == '\t' {
					n = 4 - col%4
				}
				for range n {
					b = append(b, ' ')
				}
				col += n
			}
		}
		run = -1
		switch {
		case r == '[' && !brackets:
			r = '('
		case r == ']' && !brackets:
			r = ')'
		}
		b = utf8.AppendRune(b, r) // U+FFFD for an invalid byte (size 1)
		col++
		i += size
	}
	return string(b)
}

// fenceLines says of each of lines (indented by spaces only, blank ones
// "") whether it is fenced code as escapeChunk writes it: a line opening a
// fence (a run of three or more backticks or tildes after its
// indentation) that a later line closes (closesFence), the lines after
// it, and the line closing it. A fence the lines never close is prose.
func fenceLines(lines []string) []bool {
	code := make([]bool, len(lines))
	closed := fencesClosed(lines)
	fence, open := "", 0 // open: the opening fence's indentation
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case fence != "":
			code[i] = true
			if closesFence(trimmed, indent, fence, open) {
				fence = ""
			}
		case fenceRun(trimmed) > 0 && closed[i]:
			fence, open, code[i] = trimmed[:fenceRun(trimmed)], indent, true
		}
	}
	return code
}

// escapeChunk is escape for a document chunk's text in the system and
// markdown formats; s is the text as neutralizeLinesKeeping keeps it,
// square brackets included. Its fenced code, the fence lines and the
// lines between (a run of three or more backticks or tildes after a
// line's indentation, closed by a run as long of the same indented at
// most three spaces more), is left as written when the chunk has several
// lines, its square brackets too ("[]byte", "m[k]"): the code reaches the
// model as the document has it, where "x \:= 1", "a\_b" or "make(()byte,
// n)" was another program. Its separators forge nothing there: every
// line of a chunk but its first is indented under its entry, so none
// starts an entry, a section or a heading, and a line that would read as
// an entry's last line, opening "(source:" or a citation mark "[n]"
// (where a reader, and extractor.StripMarkers, end a chunk's lines), has
// its brackets made parentheses as the text outside the code does, and
// so has an inline block's opening bracket (closeMemoryBlocks). A
// fence at any indentation counts, not only CommonMark's three spaces at
// the margin: the chunker reads a fence under a list item (indented four
// or more) as code, and at worst literal fences in indented code leave
// the prose between them as written, which forges nothing either.
//
// A fence counts only when the chunk closes it. A line opening one it
// does not close (a document ending inside a code block, a list item's
// fence ended by a line left of the item's text, a fence line in
// indented code) is prose, its run's first backtick or tilde escaped
// ("\```sh") so that no reader opens a fence there: left open, the
// fence held the entry's source or mark line and the entries after it.
func escapeChunk(s, special string) string {
	if !strings.Contains(s, "```") && !strings.Contains(s, "~~~") {
		return escape(parenthesized(s), special)
	}
	lines := strings.Split(s, "\n")
	code := fenceLines(lines)
	var b strings.Builder
	fence, open := "", 0 // the code's opening fence and its indentation
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case !code[i]:
		case fence == "":
			fence, open = trimmed[:fenceRun(trimmed)], indent
		case closesFence(trimmed, indent, fence, open):
			fence = ""
		case strings.HasPrefix(trimmed, fence) && strings.TrimRight(strings.Trim(trimmed, fence[:1]), " ") == "":
			// A fence's run indented past its opener is code, but
			// StripMarkers, which may not see the indentation (a
			// frontend drops it), would read it as closing the fence
			// and end the chunk at the code's next blank line.
			b.WriteString(line[:indent] + `\` + trimmed)
			continue
		}
		switch {
		case !code[i] && fenceRun(strings.TrimLeft(strings.TrimPrefix(trimmed, numberedLead.FindString(trimmed)), " ")) > 0:
			// One line (its source or mark follows it on the line), a
			// fence never closed, or a numbered line ending in one
			// ("2. ```", which StripMarkers would read as an entry
			// opening a fence): prose, the fence escaped.
			lead := line[:indent] + numberedLead.FindString(trimmed)
			rest := line[len(lead):]
			sp := len(rest) - len(strings.TrimLeft(rest, " "))
			b.WriteString(escape(parenthesized(lead+rest[:sp]), special) + `\` + escape(parenthesized(rest[sp:]), special))
		case !code[i]:
			b.WriteString(escape(parenthesized(line), special))
		case strings.HasPrefix(trimmed, "(source:") || citationMark.MatchString(trimmed):
			b.WriteString(parenthesized(line))
		default:
			b.WriteString(line)
		}
	}
	return closeMemoryBlocks(b.String())
}

// memoryBlock opens an inline injection's block, "[facts:" or
// "[context:", as extractor.StripMarkers finds one (any case, white
// space, line breaks too, around the word).
var memoryBlock = regexp.MustCompile(`(?i)\[\s*(?:` + regexp.QuoteMeta(strings.Trim(events.FactsMarker, "[:")) + `|` +
	regexp.QuoteMeta(strings.Trim(events.ContextMarker, "[:")) + `)\s*:`)

// closeMemoryBlocks is s, a chunk's text as escapeChunk writes it, with
// the square bracket of each "[facts:" or "[context:" in its fenced code
// (the text outside has none) made a parenthesis: no stored text opens
// one, in any format. A frontend echoing an injection with its
// indentation dropped, a document's line reading as an injection's
// opening before it, had StripMarkers remove the message from there to
// the end, the user's own words with it.
func closeMemoryBlocks(s string) string {
	if !strings.Contains(s, "[") {
		return s
	}
	return memoryBlock.ReplaceAllStringFunc(s, func(m string) string { return "(" + m[1:] })
}

// fenceRun is the length of the run of backticks or tildes opening
// trimmed (a line after its indentation) when it is three or more, a
// fence's, else 0.
func fenceRun(trimmed string) int {
	if !strings.HasPrefix(trimmed, "```") && !strings.HasPrefix(trimmed, "~~~") {
		return 0
	}
	return len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
}

// closesFence reports whether a line, trimmed after its indent spaces,
// closes fence opened at indentation open: a run as long or longer of
// its character, indented at most three spaces more, then spaces only.
func closesFence(trimmed string, indent int, fence string, open int) bool {
	return indent <= open+3 && strings.HasPrefix(trimmed, fence) && strings.TrimRight(strings.Trim(trimmed, fence[:1]), " ") == ""
}

// fencesClosed says of each of lines whether a fence it opens is closed
// by a line after it (closesFence), in one scan from the end: for each
// fence character and run length, the least indentation of the later
// lines of a run at least that long that close a fence. A fence a
// chunk never closes would be found by reading on to its end again for
// each such line, quadratic in a chunk of thousands of them.
func fencesClosed(lines []string) []bool {
	closed := make([]bool, len(lines))
	var least [2][]int // by character (backtick, tilde), by run length
	for i := len(lines) - 1; i >= 0; i-- {
		trimmed := strings.TrimLeft(lines[i], " ")
		run := fenceRun(trimmed)
		if run == 0 {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		k := 0
		if trimmed[0] == '~' {
			k = 1
		}
		closed[i] = run < len(least[k]) && least[k][run] <= indent+3
		if strings.TrimRight(strings.Trim(trimmed, trimmed[:1]), " ") != "" {
			continue // has an info string: closes nothing (closesFence)
		}
		for len(least[k]) <= run {
			least[k] = append(least[k], math.MaxInt)
		}
		for n := 3; n <= run; n++ {
			least[k][n] = min(least[k][n], indent)
		}
	}
	return closed
}

// numberedLead is a numbered line's number, "2. ", as StripMarkers reads
// an entry's (extractor's numberedRE).
var numberedLead = regexp.MustCompile(`^\d+\. `)

// citationMark opens a line with a citation's number, "[3]".
var citationMark = regexp.MustCompile(`^\[\d+\]`)

// parenthesized is s with its square brackets as parentheses, as
// neutralize writes them.
func parenthesized(s string) string {
	if !strings.ContainsAny(s, "[]") {
		return s
	}
	return strings.NewReplacer("[", "(", "]", ")").Replace(s)
}

// indentLines puts indent before each line of s after the first: a
// chunk's lines stay under its entry, none at the injection's margin
// where a line could read as a new item, section or heading.
func indentLines(s, indent string) string {
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

// chunkInjectionTokens is the most tokens a document chunk's text takes in
// an injection of any format (estimateTokens): its lines as
// neutralizeLines keeps them (a leading tab four spaces), escaped and
// indented under its entry as the format writes them. Its entry's frame
// and citation are not counted. docs.put's largest_chunk_tokens, which
// counted the stored text, said a chunk of tab-indented code fitted a
// budget that its injection was twice.
func chunkInjectionTokens(text string) int {
	lines := neutralizeLines(text)
	n := estimateTokens(indentLines(escape(lines, inlineItemSpecial), inlineIndent))
	written := neutralizeLinesKeeping(text, true)
	for _, special := range []string{systemSpecial, markdownSpecial} {
		n = max(n, estimateTokens(indentLines(escapeChunk(written, special), systemIndent)))
	}
	return n
}

func cleanChunks(chunks []events.DocumentChunk) []cleanChunk {
	out := make([]cleanChunk, len(chunks))
	for i, c := range chunks {
		hs := make([]string, len(c.HeadingPath))
		for j, h := range c.HeadingPath {
			hs[j] = neutralize(h)
		}
		out[i] = cleanChunk{
			text:     neutralizeLines(c.Text),
			written:  neutralizeLinesKeeping(c.Text, true),
			source:   neutralize(c.Source),
			headings: hs,
			index:    c.ChunkIndex,
			score:    c.Score,
		}
		out[i].size = countText(out[i].text).plus(countText(out[i].source))
	}
	return out
}

// render builds the injection of format from facts and items; "" when both
// are empty. Stored text is escaped with the format's specials, so that it
// can never start a fact or an item.
func render(format string, facts []cleanFact, items []cleanItem) string {
	return renderDocs(format, facts, items, nil)
}

// renderDocs is render with document chunks, each cited by its number
// (the first chunk is [1]) in the format's own style: see
// docs/protocol.md, "Injection formats". Without chunks it is render,
// byte for byte.
func renderDocs(format string, facts []cleanFact, items []cleanItem, chunks []cleanChunk) string {
	if len(facts) == 0 && len(items) == 0 && len(chunks) == 0 {
		return ""
	}
	var b strings.Builder
	switch format {
	case events.FormatSystem:
		b.WriteString(events.SystemPreamble)
		b.WriteString("\n")
		n := 0
		if len(facts) > 0 {
			b.WriteString("\nFacts about the user:\n")
			for _, f := range facts {
				n++
				fmt.Fprintf(&b, "%d. %s: %s (source: %s)\n", n, escape(f.key, systemSpecial), escape(f.value, systemSpecial), f.source(systemSpecial+sourceSpecial))
			}
		}
		if len(items) > 0 {
			b.WriteString("\nRetrieved memories:\n")
			for _, it := range items {
				n++
				fmt.Fprintf(&b, "%d. User: %s", n, escape(it.question, systemSpecial))
				if it.answer != "" {
					fmt.Fprintf(&b, " Assistant: %s", escape(it.answer, systemSpecial))
				}
				fmt.Fprintf(&b, " (source: %s)\n", it.source(systemSpecial+sourceSpecial))
			}
		}
		if len(chunks) > 0 {
			b.WriteString("\nRetrieved documents:\n")
			for i, c := range chunks {
				n++
				// A chunk of several lines has its source on a line of
				// its own: after a code fence's closing line, on it, the
				// fence would not close.
				sep := " "
				if strings.Contains(c.text, "\n") {
					sep = "\n" + systemIndent
				}
				fmt.Fprintf(&b, "%d. %s%s(source: [%d] %s)\n", n, indentLines(escapeChunk(c.written, systemSpecial), systemIndent), sep, i+1, c.cite(systemSpecial+citeSpecial))
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	case events.FormatMarkdown:
		b.WriteString(events.MarkdownHeading + "\n")
		if len(facts) > 0 {
			b.WriteString("\n### Facts\n")
			for _, f := range facts {
				fmt.Fprintf(&b, "- **%s**: %s _(source: %s)_\n", escape(f.key, markdownSpecial), escape(f.value, markdownSpecial), f.source(markdownSpecial+sourceSpecial))
			}
		}
		if len(items) > 0 {
			b.WriteString("\n### Relevant memories\n")
			for i, it := range items {
				fmt.Fprintf(&b, "%d. **User:** %s\n", i+1, escape(it.question, markdownSpecial))
				if it.answer != "" {
					fmt.Fprintf(&b, "   **Assistant:** %s\n", escape(it.answer, markdownSpecial))
				}
				fmt.Fprintf(&b, "   _Relevance %.2f; source: %s_\n", it.score, it.source(markdownSpecial+sourceSpecial))
			}
		}
		if len(chunks) > 0 {
			b.WriteString("\n### Documents\n")
			for i, c := range chunks {
				text := escapeChunk(c.written, markdownSpecial)
				if !strings.Contains(text, "\n") {
					fmt.Fprintf(&b, "%d. %s [%d]\n   _Relevance %.2f_\n", i+1, text, i+1, c.score)
					continue
				}
				// Lines indented as far as the item's text ("10. " is
				// four wide), so that all stay in the item; its mark
				// on the relevance line, as after a closing fence it
				// would keep the fence open.
				indent := strings.Repeat(" ", len(strconv.Itoa(i+1))+2)
				fmt.Fprintf(&b, "%d. %s\n%s[%d] _Relevance %.2f_\n", i+1, indentLines(text, indent), indent, i+1, c.score)
			}
			// The numbered citations under the context: what a model
			// quotes "[n]" from, and what a frontend lists under its answer.
			b.WriteString("\n### Citations\n")
			for i, c := range chunks {
				fmt.Fprintf(&b, "- [%d] %s\n", i+1, c.cite(markdownSpecial+citeSpecial))
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	default:
		if len(facts) > 0 {
			b.WriteString(events.FactsMarker + " ")
			for i, f := range facts {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(escape(f.key, inlineFactSpecial))
				b.WriteByte('=')
				b.WriteString(escape(f.value, inlineFactSpecial))
			}
			b.WriteString("]")
		}
		if len(items) > 0 || len(chunks) > 0 {
			if len(facts) > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(events.ContextMarker + " ")
			for i, it := range items {
				if i > 0 {
					b.WriteString(" | ")
				}
				b.WriteString("User: ")
				b.WriteString(escape(it.question, inlineItemSpecial))
				if it.answer != "" {
					b.WriteString("\nAssistant: ")
					b.WriteString(escape(it.answer, inlineItemSpecial))
				}
			}
			// Chunks are items of the same block, so that a frontend
			// echoing the injection back has them stripped with it
			// (extractor.StripMarkers); each opens with its citation.
			for i, c := range chunks {
				if i > 0 || len(items) > 0 {
					b.WriteString(" | ")
				}
				fmt.Fprintf(&b, "[%d] %s: %s", i+1, c.cite(inlineCiteSpecial+citeSpecial), indentLines(escape(c.text, inlineItemSpecial), inlineIndent))
				if strings.Contains(c.text, "\n") {
					b.WriteByte('\n') // what follows a closing fence is not on its line
				}
			}
			b.WriteString("]")
		}
		return b.String()
	}
}

// inject renders facts and items in format within maxTokens. Facts (most
// recent first) rank above context items (best score first). Items are
// taken in rank order and one that would overflow the budget is dropped
// whole, never cut; a later, smaller item may still fit. It returns the facts
// and items kept (in rank order, never nil), the injection and its tokens.
func inject(format string, maxTokens int, facts []events.Fact, items []events.ContextItem) ([]events.Fact, []events.ContextItem, string, int) {
	f, it, _, text, tokens := injectDocs(format, maxTokens, len(items), facts, items, nil)
	return f, it, text, tokens
}

// injectDocs is inject with document chunks (best first). Facts come
// first; then context items and chunks take turns, the best item, the
// best chunk, the second item, the second chunk, and so on, so that
// neither kind can take the whole budget from the other (their scores are
// not on one scale). Each is dropped whole when it would overflow the
// budget. At most maxItems items are kept: those past it are reserves,
// taken in rank order in place of items dropped. The chunks kept are
// numbered for citation in their rank order. Without chunks it is inject,
// byte for byte.
func injectDocs(format string, maxTokens, maxItems int, facts []events.Fact, items []events.ContextItem, chunks []events.DocumentChunk) ([]events.Fact, []events.ContextItem, []events.DocumentChunk, string, int) {
	return injectCached(nil, time.UTC, format, maxTokens, maxItems, facts, items, chunks)
}

// injectCached is injectDocs cleaning items through cache, and only those
// it reads: the reserves past maxItems when an item is dropped. Sources'
// dates are days in loc (datesIn).
func injectCached(cache cleanCache, loc *time.Location, format string, maxTokens, maxItems int, facts []events.Fact, items []events.ContextItem, chunks []events.DocumentChunk) ([]events.Fact, []events.ContextItem, []events.DocumentChunk, string, int) {
	cf, cc := cleanFacts(facts, loc), cleanChunks(chunks)
	first := min(len(items), maxItems)
	ci := make([]cleanItem, first, len(items))
	for i := range first {
		ci[i] = cache.item(items[i], loc)
	}
	// The texts alone, counted, tell when the whole cannot fit (the
	// rendering holds them whole, escaping only adds): on real
	// conversations it often cannot, and rendering it to know was a
	// tenth of enrich's time.
	var whole textCount
	for _, f := range cf {
		whole = whole.plus(f.size)
	}
	for _, it := range ci[:first] {
		whole = whole.plus(it.size)
	}
	for _, c := range cc {
		whole = whole.plus(c.size)
	}
	if whole.tokens() <= maxTokens {
		if text := renderDocs(format, cf, ci[:first], cc); estimateTokens(text) <= maxTokens {
			if facts == nil {
				facts = []events.Fact{}
			}
			if items == nil {
				items = []events.ContextItem{}
			}
			return facts, items[:first], numbered(chunks), text, estimateTokens(text)
		}
	}
	var (
		keptFacts  []events.Fact
		keptItems  []events.ContextItem
		keptChunks []events.DocumentChunk
		kf         []cleanFact
		kci        []cleanItem
		kcc        []cleanChunk
		text       string
		tokens     int
	)
	// Each candidate is tried by rendering; an item whose own text alone
	// exceeds what is left is skipped without rendering.
	try := func(size int, add, undo func()) {
		if tokens+size > maxTokens {
			return
		}
		add()
		t := renderDocs(format, kf, kci, kcc)
		if n := estimateTokens(t); n <= maxTokens {
			text, tokens = t, n
			return
		}
		undo()
	}
	for i, f := range cf {
		try(f.size.tokens(), func() {
			kf, keptFacts = append(kf, f), append(keptFacts, facts[i])
		}, func() {
			kf, keptFacts = kf[:len(kf)-1], keptFacts[:len(keptFacts)-1]
		})
	}
	for i := range max(len(items), len(cc)) {
		if i < len(items) && len(keptItems) < maxItems {
			if i == len(ci) {
				ci = append(ci, cache.item(items[i], loc)) // a reserve
			}
			it := ci[i]
			try(it.size.tokens(), func() {
				kci, keptItems = append(kci, it), append(keptItems, items[i])
			}, func() {
				kci, keptItems = kci[:len(kci)-1], keptItems[:len(keptItems)-1]
			})
		}
		if i < len(cc) {
			c := cc[i]
			try(c.size.tokens(), func() {
				kcc, keptChunks = append(kcc, c), append(keptChunks, chunks[i])
			}, func() {
				kcc, keptChunks = kcc[:len(kcc)-1], keptChunks[:len(keptChunks)-1]
			})
		}
	}
	if keptFacts == nil {
		keptFacts = []events.Fact{}
	}
	if keptItems == nil {
		keptItems = []events.ContextItem{}
	}
	return keptFacts, keptItems, numbered(keptChunks), text, tokens
}

// numbered returns chunks (never nil) with their citation numbers, 1 first.
func numbered(chunks []events.DocumentChunk) []events.DocumentChunk {
	out := make([]events.DocumentChunk, len(chunks))
	for i, c := range chunks {
		c.Citation = i + 1
		if c.HeadingPath == nil {
			c.HeadingPath = []string{}
		}
		out[i] = c
	}
	return out
}
