package proxy

// picker reads a JSON text fed in pieces and keeps only the object members
// whose key is in keep, at any depth, their values picked the same way:
// of a non-streamed chat completion, the id, choices, index, message,
// content and finish_reason, without the logprobs, usage or extensions,
// whose size no client bounds (top_logprobs of 20 on a few thousand
// tokens is megabytes for an answer of a line). What it keeps is JSON
// again (without white space) when the input is; it does not validate, and
// a malformed input gives an output json.Unmarshal refuses.
type picker struct {
	keep map[string]bool
	out  []byte
	// frames are the containers the reader is in, innermost last.
	frames []pickFrame
	// skip > 0: inside a dropped value, this many containers deep;
	// skipNext: the next value is a dropped member's.
	skip     int
	skipNext bool
	// The token being read: a string (escaped: after a backslash) or a
	// number or literal; key is a member name read so far, up to
	// maxKeyBytes (longer names are not in keep).
	inString, escaped, inScalar, isKey, dropToken bool
	key                                           []byte
}

type pickFrame struct {
	object    bool
	expectKey bool
	members   int
}

// maxKeyBytes bounds the member name a picker buffers.
const maxKeyBytes = 64

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
		p.tokenByte(c)
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
		if f := p.top(); f != nil && f.object && p.skip == 0 {
			f.expectKey = true
		}
	case '{', '[':
		if p.skip > 0 {
			p.skip++
			return
		}
		if p.startValue() {
			p.skip = 1
			return
		}
		p.out = append(p.out, c)
		p.frames = append(p.frames, pickFrame{object: c == '{', expectKey: c == '{'})
	case '}', ']':
		if p.skip > 0 {
			p.skip--
			return
		}
		if len(p.frames) > 0 {
			p.frames = p.frames[:len(p.frames)-1]
			p.out = append(p.out, c)
		}
	case '"':
		p.inString = true
		if f := p.top(); p.skip == 0 && f != nil && f.object && f.expectKey {
			p.isKey, p.dropToken, p.key = true, true, p.key[:0]
			return
		}
		p.isKey = false
		p.dropToken = p.skip > 0 || p.startValue()
		p.tokenByte(c)
	default:
		p.inScalar, p.isKey = true, false
		p.dropToken = p.skip > 0 || p.startValue()
		p.tokenByte(c)
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
	if len(p.key) > maxKeyBytes || !p.keep[string(name)] {
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
