package extractor

import (
	"regexp"
	"strings"

	"github.com/memoryd/memoryd/events"
)

// markerOpenRE finds the opening of an injected memory block, one of the
// markers the enricher writes (events.FactsMarker, events.ContextMarker).
// Whitespace is tolerated inside the opener because templates and models
// reformat it.
var markerOpenRE = regexp.MustCompile(`(?i)\[\s*(?:` + markerName(events.FactsMarker) + `|` + markerName(events.ContextMarker) + `)\s*:`)

// markerName is the word of a marker "[word:", quoted for a regexp.
func markerName(marker string) string {
	return regexp.QuoteMeta(strings.TrimSuffix(strings.TrimPrefix(marker, "["), ":"))
}

// maxStripPasses bounds the re-scans that catch a marker formed by joining
// the text around a removed block ("[fac" + "[facts: x]" + "ts: y]").
const maxStripPasses = 4

// StripMarkers removes memory blocks that memoryd injected into a
// conversation earlier, "[facts: ...]" and "[context: ...]", and the
// system and markdown formats' injections (stripFormatted), and trims the
// result.
//
// The marker is matched case-insensitively and a block may span lines and
// contain nested brackets: it is removed through its matching closing
// bracket, or to the end of s when it is never closed. Text outside blocks is
// kept byte for byte (apart from the trimming and from collapsing the two
// spaces around a removed inline block into one), so valid UTF-8 stays valid.
// StripMarkers is linear in len(s) and safe on any input.
func StripMarkers(s string) string {
	s = stripFormatted(s)
	for range maxStripPasses {
		var removed bool
		if s, removed = stripOnce(s); !removed {
			break
		}
	}
	return strings.TrimSpace(s)
}

// stripOnce removes the blocks of one left-to-right scan.
func stripOnce(s string) (string, bool) {
	loc := markerOpenRE.FindStringIndex(s)
	if loc == nil {
		return s, false
	}

	var b strings.Builder
	b.Grow(len(s))
	rest := s
	for loc != nil {
		b.WriteString(rest[:loc[0]])
		rest = rest[blockEnd(rest, loc[0]):]
		// "a [facts: x] b" should read "a b", not "a  b".
		if endsWithBlank(b.String()) {
			rest = strings.TrimLeft(rest, " \t")
		}
		loc = markerOpenRE.FindStringIndex(rest)
	}
	b.WriteString(rest)
	return b.String(), true
}

// blockEnd returns the index just past the bracket that closes the block
// opening at s[open] == '[', or len(s) when it is never closed.
func blockEnd(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

func endsWithBlank(s string) bool {
	return s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t')
}

// Line shapes of the system and markdown injections (enricher's
// renderDocs): stored text holds no line break (neutralize) but a
// document chunk's (see chunkEnds), so each fact, item, source and
// citation is one line of its shape, and the block ends at the first line
// of none. Leading spaces are not required:
// a frontend or a model may have reformatted the indentation.
var (
	systemLineRE     = regexp.MustCompile(`^(?:|Facts about the user:|Retrieved memories:|Retrieved documents:|\d+\. .*\(source: .*\))$`)
	systemHeaderRE   = regexp.MustCompile(`^(?:Facts about the user:|Retrieved memories:|Retrieved documents:)$`)
	markdownHeaderRE = regexp.MustCompile(`^### (?:Facts|Relevant memories|Documents|Citations)$`)
	markdownLineRE   = regexp.MustCompile(`^(?:|### (?:Facts|Relevant memories|Documents|Citations)|- \*\*.*\*\*: .*_\(source: .*\)_|\d+\. \*\*User:\*\* .*|\*\*Assistant:\*\* .*|_Relevance \d+\.\d+(?:; source: .*)?_|\d+\. .* \[\d+\]|- \[\d+\] .*)$`)

	// A document chunk of several lines: its numbered first line, its
	// other lines indented, and its last line (source, or mark and
	// relevance) of these shapes.
	numberedRE     = regexp.MustCompile(`^\d+\. `)
	systemLastRE   = regexp.MustCompile(`^\(source: \[\d+\] .*\)$`)
	markdownLastRE = regexp.MustCompile(`^\[\d+\] _Relevance \d+\.\d+_$`)
)

// chunkEnds finds the document chunks of several lines of one format in
// lines: a numbered line, then lines through the first of last's shape,
// none of them a blank line outside fenced code or an injection's
// opening at the margin (a frontend or a model may have dropped the
// indentation of the lines in between; an indented one is a chunk's own
// line, a page quoting memoryd's preamble or heading, which ended the
// chunk there and kept the rest of the injection as the user's text). A
// chunk's fenced code keeps its blank lines (see inFencedCode).
// stop[j] is the first line from j that ends such a run (blank, an
// opening, of last's shape), len(lines) when none: one scan from the end,
// so that StripMarkers stays linear where each numbered line read the
// lines after it.
type chunkEnds struct {
	last *regexp.Regexp
	stop []int
}

func newChunkEnds(lines []string, last *regexp.Regexp) *chunkEnds {
	stop := make([]int, len(lines)+1)
	stop[len(lines)] = len(lines)
	code := inFencedCode(lines, last)
	for k := len(lines) - 1; k >= 0; k-- {
		line := strings.TrimSpace(lines[k])
		indented := strings.HasPrefix(lines[k], " ") || strings.HasPrefix(lines[k], "\t")
		if line == "" && !code[k] || opening(line) && !indented || last.MatchString(line) {
			stop[k] = k
		} else {
			stop[k] = stop[k+1]
		}
	}
	return &chunkEnds{last: last, stop: stop}
}

// inFencedCode says of each of lines whether it is inside fenced code
// as a document chunk's entry holds it: after a line opening a fence (a
// run of three or more backticks or tildes after its indentation, or
// after its entry's number, "1. ```go"), through the line closing it (a
// run as long or longer of the same, alone), indentation kept or dropped.
// An entry's last line (of last's shape) and an injection's opening end
// one left open (a user's fence before the injection, the chunks'
// fences are closed: the enricher escapes one it does not close), so
// that a blank line only inside a chunk's code goes on with the chunk.
// One scan from the start: linear, as StripMarkers must stay.
func inFencedCode(lines []string, last *regexp.Regexp) []bool {
	code := make([]bool, len(lines))
	fence := ""
	for k, l := range lines {
		line := strings.TrimSpace(l)
		switch {
		case last.MatchString(line) || opening(line) && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t"):
			// An indented opening is a chunk's line (its code may quote
			// memoryd's heading), as newChunkEnds reads it.
			fence = ""
		case fence != "":
			code[k] = true
			if strings.HasPrefix(line, fence) && strings.Trim(line, fence[:1]) == "" {
				fence = ""
			}
		default:
			t := strings.TrimLeft(strings.TrimPrefix(line, numberedRE.FindString(line)), " ")
			if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
				fence = t[:len(t)-len(strings.TrimLeft(t, t[:1]))]
			}
		}
	}
	return code
}

// lines is how many lines from lines[i] are a document chunk of several
// lines, 0 when they are not.
func (c *chunkEnds) lines(lines []string, i int) int {
	if i+1 >= len(lines) || !numberedRE.MatchString(strings.TrimSpace(lines[i])) {
		return 0
	}
	if k := c.stop[i+1]; k < len(lines) && c.last.MatchString(strings.TrimSpace(lines[k])) {
		return k - i + 1
	}
	return 0
}

// opening reports whether the trimmed line opens a system or markdown
// injection: the heading, or the preamble alone on its line (or its
// older, shorter form; a line that goes on past it is a user's).
func opening(line string) bool {
	return line == events.MarkdownHeading || strings.HasPrefix(line, systemLead) && strings.HasPrefix(events.SystemPreamble, line)
}

// stripFormatted removes the system and markdown injections s holds
// (events.SystemPreamble, events.MarkdownHeading): from the line that
// opens one (the heading, or the preamble alone on its line) through the
// last line after it of the format's shapes, blank lines included, where
// a blank run goes on only to a section's header. The lines around it are
// kept as they are. It is linear in len(s).
func stripFormatted(s string) string {
	if !strings.Contains(s, events.MarkdownHeading) && !strings.Contains(s, systemLead) {
		return s
	}
	lines := strings.Split(s, "\n")
	var markdownChunks, systemChunks *chunkEnds // made when first needed
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		var (
			shape, header *regexp.Regexp
			chunks        *chunkEnds
			docs          string // the documents section's header
			inDocs        bool   // the lines are in it
		)
		switch line := strings.TrimSpace(lines[i]); {
		case !opening(line):
			out = append(out, lines[i])
			continue
		case line == events.MarkdownHeading:
			if markdownChunks == nil {
				markdownChunks = newChunkEnds(lines, markdownLastRE)
			}
			shape, header, chunks, docs = markdownLineRE, markdownHeaderRE, markdownChunks, "### Documents"
		default:
			if systemChunks == nil {
				systemChunks = newChunkEnds(lines, systemLastRE)
			}
			shape, header, chunks, docs = systemLineRE, systemHeaderRE, systemChunks, "Retrieved documents:"
		}
		for i+1 < len(lines) {
			next := strings.TrimSpace(lines[i+1])
			if next != "" {
				// A chunk only in the documents section: after the facts
				// or memories, a user's numbered line on the next line
				// through one of a chunk's last shape is the user's.
				if inDocs {
					if n := chunks.lines(lines, i+1); n > 0 {
						i += n
						continue
					}
				}
				if !shape.MatchString(next) {
					break
				}
				if header.MatchString(next) {
					inDocs = next == docs
				}
				i++
				continue
			}
			// The formats write blank lines only before a section's
			// header: a blank run is the injection's (and removed) but
			// what follows it is the injection's only when it is such a
			// header, not a user's list or heading of the item shapes.
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			i = j - 1
			if j == len(lines) || !header.MatchString(strings.TrimSpace(lines[j])) {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// systemLead is the first sentence of events.SystemPreamble, which opens
// a system injection's line (an older memoryd's preamble had only the
// first two sentences).
var systemLead = events.SystemPreamble[:strings.Index(events.SystemPreamble, ".")+1]
