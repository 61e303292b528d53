package proxy

import (
	"regexp"
	"strings"
	"unicode"
)

// reasoningTag matches the tags around the reasoning some models write in
// their content before the answer (DeepSeek-R1, Qwen3, QwQ served without
// a reasoning parser), under the names they use; the extractor reads its
// own model's replies past the same tags.
var reasoningTag = regexp.MustCompile(`(?i)<(/?)(think|thinking|reasoning)>`)

// withoutReasoning returns the answer of a reply's text: without the
// reasoning blocks it opens with, and, when its first tag closes a block
// (DeepSeek-R1's chat template opens the block in the prompt, so the
// content starts inside it) at a line's start or end and outside code,
// without everything up to that tag (see endsReasoning). A block
// opened and never closed (the reply cut by its token limit while
// thinking) leaves no answer, "", when its tag opens it as models write
// it: at the text's end, or followed by its thinking or a line break
// (blanks before it included; see opensReasoning); a tag followed by a
// space and text on its line is the answer's prose ("<think> tags are
// how ..."), which a walk found stored without a reply. A tag after the answer has begun is the answer's text. Chat apps
// hide the reasoning: the user never read it, and remembered, it came
// back in later prompts as what the assistant had said.
func withoutReasoning(text string) string { return answerOf(text, false) }

// answerOf is withoutReasoning for a reply that cut says whether its
// token limit cut (finish reason "length"): a block it opened and never
// closed leaves no answer, whatever follows the tag.
func answerOf(text string, cut bool) string {
	first := reasoningTag.FindStringSubmatchIndex(text)
	if first == nil {
		return text
	}
	stripped := false
	if first[3] > first[2] && endsReasoning(text, first[0], first[1]) {
		text, stripped = text[first[1]:], true
	}
	for {
		rest := strings.TrimLeftFunc(text, unicode.IsSpace)
		m := reasoningTag.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 || m[3] > m[2] {
			break
		}
		end := closingTag(rest[m[1]:], rest[m[4]:m[5]])
		if end < 0 {
			if cut || opensReasoning(rest[m[1]:]) {
				return ""
			}
			break // prose naming the tag: the answer
		}
		text, stripped = rest[m[1]+end:], true
	}
	if stripped {
		// The blank lines a model writes after its block.
		return strings.TrimLeftFunc(text, unicode.IsSpace)
	}
	return text
}

// closingTag returns the end in s of the first tag closing a block named
// name (in any case), or -1.
func closingTag(s, name string) int {
	for _, m := range reasoningTag.FindAllStringSubmatchIndex(s, -1) {
		if m[3] > m[2] && strings.EqualFold(s[m[4]:m[5]], name) {
			return m[1]
		}
	}
	return -1
}

// endsReasoning reports whether the closing tag text[start:end], the
// first tag of text, ends reasoning the text opened inside, as R1 and
// Qwen3 write it: at a line's end or start ("...\n</think>\n\n").
// Mid-line, just after a backtick or inside a code block, it is a tag the
// answer of a model that does not reason talks about ("splits at
// `</think>`, then ..."), and the text before it is that answer's.
func endsReasoning(text string, start, end int) bool {
	before := text[:start]
	if strings.HasSuffix(before, "`") || strings.Count(before, "```")%2 == 1 {
		return false
	}
	after := strings.TrimLeft(text[end:], " \t")
	lineBefore := before[strings.LastIndexByte(before, '\n')+1:]
	return after == "" || after[0] == '\n' || after[0] == '\r' || strings.TrimLeft(lineBefore, " \t") == ""
}

// opensReasoning reports whether an opening tag that after follows, and
// that nothing closes, opens reasoning as models write it: "<think>\n"
// (R1, Qwen3, QwQ), the thinking at once ("<think>Okay"), or the tag
// last on its line (cut right after it, or blanks before the line break:
// "<think> \n" remembered its thinking as the answer). A space or tab
// and then text on the tag's line is prose naming the tag, and so is
// punctuation that continues a sentence ("<think>, <thinking> and ..."):
// no model opens its thinking with it.
func opensReasoning(after string) bool {
	rest := strings.TrimLeft(after, " \t")
	if rest == "" || rest[0] == '\n' || rest[0] == '\r' {
		return true
	}
	return len(rest) == len(after) && !strings.ContainsRune(",;:)", rune(rest[0]))
}
