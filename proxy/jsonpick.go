package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// picker reads a JSON text fed in pieces and keeps only the object members
// whose key is in keep, at any depth, their values picked the same way:
// of a non-streamed chat completion, the id, choices, index, message,
// content and finish_reason, without the logprobs, usage or extensions,
// whose size no client bounds (top_logprobs of 20 on a few thousand
// tokens is megabytes for an answer of a line). What it keeps is JSON
// again (without white space) when the input is. It does not validate the
// dropped values' tokens: a malformed input gives an output json.Unmarshal
// refuses, or sets bad (a closer that closes nothing or not its opener, a
// member name without a value) or tooDeep, except for a malformed scalar,
// string or separator inside a dropped member ("usage":x).
type picker struct {
	keep map[string]bool
	out  []byte
	// frames are the containers the reader is in, innermost last.
	frames []pickFrame
	// skipped: the openers of the dropped containers the reader is in
	// (none: not inside a dropped value); skipNext: the next value is a
	// dropped member's.
	skipped  []byte
	skipNext bool
	// The token being read: a string (escaped: after a backslash) or a
	// number or literal; key is a member name read so far, up to
	// maxKeyBytes (longer names are not in keep).
	inString, escaped, inScalar, isKey, dropToken bool
	key                                           []byte
	// tooDeep: nested past maxPickDepth; bad: a closer that closes
	// nothing, or not what it should, or a member name without a value.
	// What is kept then is not read (encoding/json refuses the text too).
	tooDeep, bad bool
	// maxString, when above 0, bounds the bytes kept of a string value
	// (as written, escapes included): past it the string is cut where it
	// is whole (no escape or UTF-8 sequence broken) and closed, so that
	// a long answer keeps its start instead of overflowing what is kept.
	// strStart is where the kept string being read starts in out, hex
	// the \u escape's digits still to come, and cut that it is cut.
	maxString, strStart, hex int
	cut                      bool
}

type pickFrame struct {
	object    bool
	expectKey bool
	members   int
}

// maxKeyBytes bounds the member name a picker buffers: room for a kept
// name written with \u escapes (6 bytes a letter), as encoding/json reads.
const maxKeyBytes = 128

// maxPickDepth bounds the containers a picker is in: encoding/json refuses
// a text nested deeper (its maxNestingDepth), and a frame per byte of the
// text would otherwise hold many times maxReplyBytes.
const maxPickDepth = 10000

func newPicker(keep ...string) *picker {
	p := &picker{keep: map[string]bool{}}
	for _, k := range keep {
		p.keep[k] = true
	}
	return p
}

// feed reads the next piece of the text.
func (p *picker) feed(b []byte) {
	for _, c := range b {
		p.byte(c)
	}
}

func (p *picker) byte(c byte) {
	switch {
	case p.inString:
		// A cut string's bytes are not kept, but for its closing quote;
		// its escapes (escaped, below) tell that quote.
		if !p.cut || p.isKey || p.dropToken || (c == '"' && !p.escaped) {
			p.tokenByte(c)
			if p.maxString > 0 && !p.isKey && !p.dropToken {
				p.stringByte(c)
			}
		}
		switch {
		case p.escaped:
			p.escaped = false
		case c == '\\':
			p.escaped = true
		case c == '"':
			p.inString = false
			if p.isKey {
				p.member()
			}
		}
		return
	case p.inScalar:
		if !scalarEnd(c) {
			p.tokenByte(c)
			return
		}
		p.inScalar = false
	}
	switch c {
	case ' ', '\t', '\n', '\r', ':':
	case ',':
		if f := p.top(); f != nil && f.object && len(p.skipped) == 0 {
			f.expectKey = true
		}
	case '{', '[':
		if len(p.frames)+len(p.skipped) >= maxPickDepth {
			p.tooDeep = true
			return
		}
		if len(p.skipped) > 0 || p.startValue() {
			p.skipped = append(p.skipped, c)
			return
		}
		p.out = append(p.out, c)
		p.frames = append(p.frames, pickFrame{object: c == '{', expectKey: c == '{'})
	case '}', ']':
		opener := byte('[')
		if c == '}' {
			opener = '{'
		}
		if n := len(p.skipped); n > 0 {
			if p.skipped[n-1] != opener {
				p.bad = true
			}
			p.skipped = p.skipped[:n-1]
			return
		}
		f := p.top()
		if f == nil || f.object != (c == '}') || p.skipNext {
			p.bad = true
		}
		if f != nil {
			p.frames = p.frames[:len(p.frames)-1]
			p.out = append(p.out, c)
		}
	case '"':
		p.inString = true
		if f := p.top(); len(p.skipped) == 0 && f != nil && f.object && f.expectKey {
			p.isKey, p.dropToken, p.key = true, true, p.key[:0]
			return
		}
		p.isKey = false
		p.dropToken = len(p.skipped) > 0 || p.startValue()
		p.strStart, p.hex, p.cut = len(p.out), 0, false
		p.tokenByte(c)
	default:
		p.inScalar, p.isKey = true, false
		p.dropToken = len(p.skipped) > 0 || p.startValue()
		p.tokenByte(c)
	}
}

// stringByte follows a kept string value's byte c, just kept (c is read
// before escaped changes for it), and cuts the string (cut) once it is
// over maxString where it ends whole: not inside an escape or a UTF-8
// sequence.
func (p *picker) stringByte(c byte) {
	whole := false
	switch {
	case p.escaped:
		if c == 'u' {
			p.hex = 4
		} else {
			whole = true
		}
	case p.hex > 0:
		p.hex--
		whole = p.hex == 0
	case c == '\\' || c == '"':
	case c < utf8.RuneSelf:
		whole = true
	default:
		// A sequence's last byte makes the rune whole: its lead byte is
		// among the last four.
		start := len(p.out) - 1
		for start > p.strStart && len(p.out)-start < utf8.UTFMax && !utf8.RuneStart(p.out[start]) {
			start--
		}
		whole = utf8.FullRune(p.out[start:])
	}
	if whole && len(p.out)-p.strStart > p.maxString {
		p.cut = true
	}
}

// tokenByte keeps a byte of the token being read, or of the member name.
func (p *picker) tokenByte(c byte) {
	switch {
	case p.isKey:
		if len(p.key) <= maxKeyBytes {
			p.key = append(p.key, c)
		}
	case !p.dropToken:
		p.out = append(p.out, c)
	}
}

// member ends a member name (p.key, with its closing quote): kept, it is
// written with the comma before it; dropped, so is its value.
func (p *picker) member() {
	f := p.top()
	f.expectKey = false
	name := p.key[:len(p.key)-1]
	if len(p.key) > maxKeyBytes || !p.kept(name) {
		p.skipNext = true
		return
	}
	if f.members > 0 {
		p.out = append(p.out, ',')
	}
	f.members++
	p.out = append(p.out, '"')
	p.out = append(p.out, name...)
	p.out = append(p.out, '"', ':')
}

// kept reports whether a member name (as written, without its quotes) is
// one of keep as encoding/json matches a struct field's name: its escapes
// read, and case-insensitively ("Content" and "\u0063ontent" fill Content
// too; the last of the duplicates wins).
func (p *picker) kept(name []byte) bool {
	s := string(name)
	if bytes.IndexByte(name, '\\') >= 0 {
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &s) != nil {
			return false
		}
	}
	if p.keep[s] {
		return true
	}
	for k := range p.keep {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// startValue begins a value outside a dropped one: it reports whether the
// value is dropped (a dropped member's), else writes the comma an array
// element needs.
func (p *picker) startValue() bool {
	if p.skipNext {
		p.skipNext = false
		return true
	}
	if f := p.top(); f != nil && !f.object {
		if f.members > 0 {
			p.out = append(p.out, ',')
		}
		f.members++
	}
	return false
}

func (p *picker) top() *pickFrame {
	if len(p.frames) == 0 {
		return nil
	}
	return &p.frames[len(p.frames)-1]
}

// scalarEnd reports whether c ends a number or a literal.
func scalarEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']', ':':
		return true
	}
	return false
}
