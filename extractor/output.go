package extractor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on what one model reply may add to memory. Extra items are dropped
// and long values truncated: a runaway reply must not flood the store.
const (
	maxKeyBytes      = 64
	maxFactValueRune = 500
	maxFacts         = 50
	maxQuestionRunes = 1000
	maxAnswerRunes   = 4000
	maxContextPairs  = 20
	// maxCandidates bounds how many '{' positions are tried when looking for
	// the JSON object inside prose.
	maxCandidates = 16
)

var (
	// reasoningTagRE matches the opening and closing tags of the
	// reasoning some local models (DeepSeek-R1, Qwen3, QwQ) write before
	// their answer, under any of the names they use.
	reasoningTagRE = regexp.MustCompile(`(?i)<(/?)(think|thinking|reasoning)>`)
	// fenceRE matches a Markdown code block, with or without a language tag.
	fenceRE = regexp.MustCompile("(?s)```[a-zA-Z0-9_-]*[ \t]*\r?\n?(.*?)```")
)

// parseOutput validates a model reply and returns what it holds (Facts,
// Changes and Context of a Result). The reply must contain one JSON object
// with a "facts" member and/or a "context" list; it may be wrapped in a code
// fence or in prose. "facts" is a list of operations ({"op", "key",
// "value"}, reply format v2) or, as in v1, an object of key to value (all
// sets). Operations are resolved by resolveOps. The returned error is a
// short reason, suitable for an error message and for telling the model
// what to fix; it never quotes the reply.
func parseOutput(reply string) (Result, error) { return parseReply(reply, nil) }

// parseReply is parseOutput, telling dropped (when not nil) each fact key
// of the accepted object that modelKey drops.
func parseReply(reply string, dropped func(droppedKey)) (Result, error) {
	var (
		res  Result
		keys []droppedKey
	)
	err := scanReply(reply, func(raw json.RawMessage) error {
		keys = keys[:0]
		if isNoteExample(raw) {
			return errNoteExample
		}
		factsRaw, contextRaw, err := replyParts(raw)
		if err != nil {
			return err
		}
		items, err := factItems(factsRaw, 1, &keys)
		if err != nil {
			return err
		}
		qas, err := parseContext(contextRaw)
		if err != nil {
			return err
		}
		res = Result{Context: qas}
		res.Facts, res.Changes = resolveOps(items[0])
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	tellDropped(keys, dropped)
	return res, nil
}

// tellDropped tells dropped (when not nil) each of keys.
func tellDropped(keys []droppedKey, dropped func(droppedKey)) {
	if dropped == nil {
		return
	}
	for _, k := range keys {
		dropped(k)
	}
}

// scanReply finds the JSON object in a model reply: it drops reasoning
// blocks, tries fenced blocks first and then the whole reply, and calls try
// on each JSON object found (at most maxCandidates) until try accepts one.
// A trailing comma before a closing bracket or brace, and a Python literal
// where JSON does not decode, are tolerated (decodeFirstValue); Python
// literals only once no JSON object of the reply was accepted. When none
// is accepted it returns why, in order: the first rejection of an object
// that stands on its own (not inside an earlier one), else that the first
// such object is not valid JSON, with the decoder's message, else that
// there is no object. An object inside one that did not decode is never
// the reason: the reply's own object is not valid JSON (a missing comma, a reply cut short), and the inner object's
// rejection (a fact item has neither "facts" nor "context") would name the
// wrong defect, to the model as its correction and to the operator.
func scanReply(reply string, try func(raw json.RawMessage) error) error {
	reply = stripReasoning(reply)
	if strings.TrimSpace(reply) == "" {
		return errors.New("reply is empty")
	}

	// Fenced blocks first: prose around them may contain stray braces.
	var texts []string
	for _, m := range fenceRE.FindAllStringSubmatch(reply, 4) {
		texts = append(texts, m[1])
	}
	texts = append(texts, reply)

	var rejected, invalid error
	// JSON first, through the whole reply, then Python literals: a reply
	// holding a JSON object is read from it, not from a literal before it
	// (a format restated, a draft), as it was before Python was read.
	for _, python := range []bool{false, true} {
		tried := 0
		for _, text := range texts {
			covered := 0 // end of the last object standing on its own
			for i := 0; i < len(text) && tried < maxCandidates; i++ {
				j := strings.IndexByte(text[i:], '{')
				if j < 0 {
					break
				}
				i += j
				tried++
				top := i >= covered
				raw, n, viaPython, err := decodeValue(text[i:], python)
				if err != nil {
					if top {
						if invalid == nil {
							invalid = fmt.Errorf("reply is not valid JSON: %s", boundDetail(err.Error()))
						}
						covered = i + balancedEnd(text[i:])
					}
					continue
				}
				if top {
					covered = i + n
				}
				if python && !viaPython {
					continue // JSON, tried in the first pass
				}
				err = try(raw)
				if err == nil {
					return nil
				}
				if top && rejected == nil {
					rejected = err
				}
			}
		}
	}
	switch {
	case rejected != nil:
		return rejected
	case invalid != nil:
		return invalid
	}
	return errors.New("reply contains no JSON object")
}

// stripReasoning drops a reply's reasoning: every block that opens and
// closes (or opens and runs to the end: an unfinished block has no answer
// after it), and, when a closing tag has no opening (the chat template
// opened the block in the prompt, so the reply starts inside it),
// everything up to and including the last such tag: the draft answers a
// reasoning model writes (and corrects) must not be taken for its answer.
// A tag inside a JSON object of the reply (a turn about prompting, quoted
// in the answer or the draft) is text, not reasoning; see jsonSpans.
func stripReasoning(reply string) string {
	tags := reasoningTagRE.FindAllStringSubmatchIndex(reply, -1)
	if len(tags) == 0 {
		return reply
	}
	spans := jsonSpans(reply)
	var b strings.Builder
	kept, openName := 0, ""
	for _, m := range tags {
		if inSpan(spans, m[0]) {
			continue
		}
		closing, name := m[3] > m[2], strings.ToLower(reply[m[4]:m[5]])
		switch {
		case !closing && openName == "":
			b.WriteString(reply[kept:m[0]])
			openName = name
		case closing && openName == name:
			openName, kept = "", m[1]
		case closing && openName == "":
			b.Reset()
			kept = m[1]
		}
	}
	if openName != "" {
		return b.String()
	}
	b.WriteString(reply[kept:])
	return b.String()
}

// maxSpanTries bounds the '{' positions jsonSpans decodes from that fail:
// prose full of braces must not make a reply quadratic to read.
const maxSpanTries = 256

// jsonSpans returns the byte ranges of the JSON objects in s, found left to
// right, each starting at a '{' outside the ones before.
func jsonSpans(s string) [][2]int {
	var spans [][2]int
	tries := 0
	for i := 0; i < len(s) && tries < maxSpanTries; {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		i += j
		_, n, err := decodeFirstValue(s[i:])
		if err != nil {
			tries++
			i++
			continue
		}
		spans = append(spans, [2]int{i, i + n})
		i += n
	}
	return spans
}

// inSpan reports whether position p lies inside one of spans.
func inSpan(spans [][2]int, p int) bool {
	for _, sp := range spans {
		if p > sp[0] && p < sp[1] {
			return true
		}
	}
	return false
}

// decodeFirstValue decodes the JSON value at the start of s, ignoring
// whatever follows it, and returns it with the number of bytes of s it
// spans. Only when the value does not decode as JSON, two fallbacks are
// tried, in order, so that valid JSON always means what it says: a comma
// before a closing bracket or brace, outside strings, is dropped (local
// models without constrained decoding often write one, {"facts": [...],},
// and nothing is lost by reading past it); then the value is read as a
// Python literal (pythonToJSON: single-quoted strings, True, False and
// None, which small local models write when they answer with a dict's
// repr; before, every such reply failed its turn for good, 12 of 12 in a
// walk). Otherwise it returns the JSON decoder's error.
func decodeFirstValue(s string) (json.RawMessage, int, error) {
	raw, n, _, err := decodeValue(s, true)
	return raw, n, err
}

// decodeValue is decodeFirstValue, reading a Python literal only when
// python is set (scanReply tries every JSON object of a reply first), and
// saying whether it did (viaPython).
func decodeValue(s string, python bool) (raw json.RawMessage, n int, viaPython bool, err error) {
	raw, n, err = decodeStrict(s)
	if err == nil {
		return raw, n, false, nil
	}
	if fixed, end, ok := dropTrailingCommas(s); ok {
		if raw, _, err := decodeStrict(fixed); err == nil {
			return raw, end, false, nil
		}
	}
	if !python {
		return nil, 0, false, err
	}
	if fixed, end, ok := pythonToJSON(s); ok {
		if raw, _, err := decodeStrict(fixed); err == nil {
			return raw, end, true, nil
		}
	}
	return nil, 0, false, err
}

// pythonToJSON rewrites the object or list at the start of s, written as
// a Python literal (a dict's repr: strings in single or double quotes,
// True, False and None, commas before a closing bracket or brace), as
// JSON, and returns it with the byte length of the value in s. It reports
// false when s does not start with such a literal that reads one way
// only: a bare word other than those three (what is left after an
// apostrophe that ends a single-quoted string early, as in 'O'Brien'), an
// escape JSON has no equivalent for (octal; Python's \xHH is read as the
// code point U+00HH: pythonHexEscapes), a control character
// in a string, or a value that never closes. The result is still decoded
// as JSON by the caller, which rejects what else is wrong.
func pythonToJSON(s string) (string, int, bool) {
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return "", 0, false
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '{' || c == '[':
			depth++
			b.WriteByte(c)
			i++
		case c == '}' || c == ']':
			b.WriteByte(c)
			i++
			if depth--; depth == 0 {
				return b.String(), i, true
			}
		case c == ',':
			if rest := strings.TrimLeft(s[i+1:], " \t\r\n"); rest == "" || (rest[0] != '}' && rest[0] != ']') {
				b.WriteByte(c)
			}
			i++
		case c == ':' || c == ' ' || c == '\t' || c == '\r' || c == '\n':
			b.WriteByte(c)
			i++
		case c == '"' || c == '\'':
			n, ok := pythonString(s[i:], &b)
			if !ok {
				return "", 0, false
			}
			i += n
		case c == '-' || c == '.' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(s) && strings.IndexByte("+-.0123456789eE", s[j]) >= 0 {
				j++
			}
			b.WriteString(s[i:j])
			i = j
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			j := i + 1
			for j < len(s) && (s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
				j++
			}
			switch s[i:j] {
			case "True", "true":
				b.WriteString("true")
			case "False", "false":
				b.WriteString("false")
			case "None", "null":
				b.WriteString("null")
			default:
				return "", 0, false
			}
			i = j
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

// pythonString writes to b, as a JSON string, the Python string literal
// at the start of s (in single or double quotes), and returns its byte
// length in s. Inside it, the other quote is text (an apostrophe in
// "O'Brien", a double quote in 'say "hi"', which JSON escapes), \' is
// an apostrophe, and \xHH the code point U+00HH (pythonHexEscapes); JSON's
// own escapes are kept. It reports false for another escape JSON lacks, a
// control character, or a string that never ends.
func pythonString(s string, b *strings.Builder) (int, bool) {
	quote := s[0]
	b.WriteByte('"')
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == quote:
			b.WriteByte('"')
			return i + 1, true
		case c == '\\':
			if i+1 == len(s) {
				return 0, false
			}
			i++
			switch e := s[i]; e {
			case '\'':
				b.WriteByte('\'')
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't', 'u':
				b.WriteByte('\\')
				b.WriteByte(e)
			case 'x':
				n, ok := pythonHexEscapes(s[i-1:], b)
				if !ok {
					return 0, false
				}
				i += n - 2 // the loop steps past the last escape's last digit
			default:
				return 0, false
			}
		case c == '"':
			b.WriteString(`\"`)
		case c < 0x20:
			return 0, false
		default:
			b.WriteByte(c)
		}
	}
	return 0, false
}

// pythonHexEscapes writes to b, as JSON escapes, the run of Python \xHH
// escapes at the start of s (each the code point U+00HH, as in a str's
// repr: 'Jos\xe9'), and returns the run's byte length in s. It reports
// false for an escape without two hex digits, and for a run whose bytes
// are UTF-8 holding a multi-byte sequence, wherever it starts
// ('Jos\xc3\xa9', '\x01\xc3\xa9'): that is a bytes repr a model copied,
// "José" or "JosÃ©", which does not read one way only.
func pythonHexEscapes(s string, b *strings.Builder) (int, bool) {
	var run []byte
	n := 0
	for len(s) >= n+4 && s[n] == '\\' && s[n+1] == 'x' {
		v, err := strconv.ParseUint(s[n+2:n+4], 16, 8)
		if err != nil {
			return 0, false
		}
		run = append(run, byte(v))
		n += 4
	}
	if n == 0 || (len(s) > n+1 && s[n] == '\\' && s[n+1] == 'x') {
		return 0, false // an escape cut short
	}
	if utf8.Valid(run) && slices.ContainsFunc(run, func(c byte) bool { return c >= utf8.RuneSelf }) {
		return 0, false
	}
	for _, c := range run {
		fmt.Fprintf(b, `\u%04x`, c)
	}
	return n, true
}

func decodeStrict(s string) (json.RawMessage, int, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, 0, err
	}
	return raw, int(dec.InputOffset()), nil
}

// dropTrailingCommas returns the object or list at the start of s without
// the commas that come (after white space only) before a closing bracket or
// brace, outside strings, and the byte length of the value in s. It reports
// false when it dropped none, or when the value never closes.
func dropTrailingCommas(s string) (string, int, bool) {
	var b strings.Builder
	depth, dropped, kept := 0, false, 0
	for i, c := range outsideStrings(s) {
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth <= 0 {
				if !dropped {
					return "", 0, false
				}
				b.WriteString(s[kept : i+1])
				return b.String(), i + 1, true
			}
		case ',':
			rest := strings.TrimLeft(s[i+1:], " \t\r\n")
			if rest != "" && (rest[0] == '}' || rest[0] == ']') {
				b.WriteString(s[kept:i])
				kept, dropped = i+1, true
			}
		}
	}
	return "", 0, false
}

// balancedEnd is the byte length of the object or list at the start of s
// as its brackets and braces (outside strings) delimit it, whether or not
// it is valid JSON; len(s) when it never closes (a reply cut short).
func balancedEnd(s string) int {
	depth := 0
	for i, c := range outsideStrings(s) {
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth <= 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// outsideStrings yields the bytes of s, with their offsets, that are not
// in a JSON string (nor its quotes).
func outsideStrings(s string) iter.Seq2[int, byte] {
	return func(yield func(int, byte) bool) {
		inString, escaped := false, false
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			case !inString:
				if !yield(i, c) {
					return
				}
			}
		}
	}
}

// replyParts splits a reply object into its "facts" and "context" values,
// each nil when absent or null; a reply with neither key is an error.
func replyParts(raw json.RawMessage) (factsRaw, contextRaw json.RawMessage, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, nil, errors.New("reply is not a JSON object")
	}
	factsRaw, hasFacts := top["facts"]
	contextRaw, hasContext := top["context"]
	if !hasFacts && !hasContext {
		return nil, nil, errors.New(`reply has neither "facts" nor "context"`)
	}
	if isNull(factsRaw) {
		factsRaw = nil
	}
	if isNull(contextRaw) {
		contextRaw = nil
	}
	return factsRaw, contextRaw, nil
}

// factItems decodes a reply's "facts" member (nil when absent) into the
// fact operations of each of n turns (n >= 1), in the order stated, with
// their keys as modelKey spells them; a key it drops is added to dropped,
// and its item is dropped. The
// object form, and a list item whose "turn" is missing or out of range,
// belong to the last turn. An item whose op is not one of the operations (or
// a synonym, see parseOp) is dropped; a malformed item fails the reply.
func factItems(raw json.RawMessage, n int, dropped *[]droppedKey) ([][]factItem, error) {
	items := make([][]factItem, n)
	if raw == nil {
		return items, nil
	}
	switch firstByte(raw) {
	case '{':
		obj, err := objectFacts(raw, dropped)
		if err != nil {
			return nil, err
		}
		items[n-1] = obj
		return items, nil
	case '[':
	default:
		return nil, fmt.Errorf(`"facts" is %s, not a list`, jsonKind(raw))
	}
	list, err := batchItems(raw, "facts")
	if err != nil {
		return nil, err
	}
	for i, fields := range list {
		keyRaw, ok := fields["key"]
		if !ok {
			return nil, fmt.Errorf(`"facts" item %d has no "key"`, i)
		}
		name, ok := scalarString(keyRaw)
		if !ok {
			return nil, fmt.Errorf(`"facts" item %d has a "key" that is %s, not a string`, i, jsonKind(keyRaw))
		}
		var value string
		if v, ok := fields["value"]; ok {
			if value, err = factValue(v); err != nil {
				return nil, fmt.Errorf("fact %q: %w", truncateRunes(sanitize(name), maxKeyBytes), err)
			}
		}
		op, ok := parseOp(fields["op"])
		if !ok {
			continue
		}
		key, why := modelKey(name)
		if why != "" {
			*dropped = append(*dropped, droppedKey{key: name, why: why})
			continue
		}
		t := turnIndex(fields["turn"], n)
		items[t] = append(items[t], factItem{Op: op, Key: key, Value: cleanModelText(value, maxFactValueRune)})
	}
	return items, nil
}

// objectFacts decodes the v1 "facts" object in order, each member a set, so
// that when two keys normalise to the same key the later one wins
// deterministically.
func objectFacts(raw json.RawMessage, dropped *[]droppedKey) ([]factItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the '{'
		return nil, errors.New(`"facts" is not valid JSON`)
	}
	var items []factItem
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New(`"facts" is not valid JSON`)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New(`"facts" is not valid JSON`)
		}
		// An object here is more often a group of facts ("personal":
		// {"name": ..., "home_city": ...}) than one value: it gets the
		// correction, which asks for the facts apart, where an object
		// value in the list form is one fact's parts (objectValue).
		if firstByte(v) == '{' {
			return nil, fmt.Errorf("fact %q: value is an object, not a string (list facts apart)", truncateRunes(sanitize(name), maxKeyBytes))
		}
		value, err := factValue(v)
		if err != nil {
			return nil, fmt.Errorf("fact %q: %w", truncateRunes(sanitize(name), maxKeyBytes), err)
		}
		key, why := modelKey(name)
		if why != "" {
			*dropped = append(*dropped, droppedKey{key: name, why: why})
			continue
		}
		items = append(items, factItem{Op: OpSet, Key: key, Value: cleanModelText(value, maxFactValueRune)})
	}
	return items, nil
}

// parseOp reads an item's "op": one of set, add, remove and delete, or an
// obvious synonym of one. A missing or null op is a set (the v1 batch items
// had none). It reports false for anything else ("unchanged", "keep", a
// number), and the item is dropped: a model that says a fact is unchanged
// has nothing to store.
func parseOp(v json.RawMessage) (FactOp, bool) {
	if v == nil || isNull(v) {
		return OpSet, true
	}
	s, ok := scalarString(v)
	if !ok || (firstByte(v) != '"') {
		return "", false
	}
	switch strings.Join(strings.Fields(strings.ToLower(s)), "_") {
	case "set", "update", "updated", "upsert", "replace", "change", "correct", "correction":
		return OpSet, true
	case "add", "added", "append", "insert", "include", "create", "new", "push":
		return OpAdd, true
	case "remove", "removed", "discard", "drop", "exclude", "pop", "subtract":
		return OpRemove, true
	case "delete", "deleted", "unset", "clear", "forget", "erase", "no_longer", "invalidate":
		return OpDelete, true
	}
	return "", false
}

// factValue coerces a fact's JSON value to a string. Strings, numbers and
// booleans are taken as they are, null means no value, a list of those is
// joined with ", " ("languages": ["English", "Portuguese"]), and an object
// of those is written "key: value; key: value" (objectValue). Objects
// holding objects, and lists holding objects or lists, are not values of a
// flat fact.
func factValue(v json.RawMessage) (string, error) {
	if firstByte(v) == '{' {
		return objectValue(v)
	}
	if firstByte(v) == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return "", errors.New("value is not valid JSON")
		}
		var parts []string
		for _, item := range items {
			s, ok := scalarString(item)
			if !ok {
				return "", fmt.Errorf("list holds %s, not strings", jsonKind(item))
			}
			if s = strings.TrimSpace(s); s != "" && !isUnknownValue(strings.ToLower(s)) {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, ", "), nil
	}
	s, ok := scalarString(v)
	if !ok {
		return "", fmt.Errorf("value is %s, not a string", jsonKind(v))
	}
	return s, nil
}

// objectValue writes an object of flat values (scalars, lists of them) as
// "key: value; key: value", in the model's order, leaving out empty and
// unknown values. Models without constrained decoding put an address or a
// family in one fact ({"street": "Rua Augusta 5", "city": "Lisbon"});
// before, such a value failed the whole reply, and a model that wrote it
// again in its correction lost the turn's every fact and pair.
func objectValue(v json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	if _, err := dec.Token(); err != nil {
		return "", errors.New("value is not valid JSON")
	}
	var parts []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", errors.New("value is not valid JSON")
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", errors.New("value is not valid JSON")
		}
		if firstByte(raw) == '{' {
			return "", errors.New("value is an object holding an object, not a flat value")
		}
		s, err := factValue(raw)
		if err != nil {
			return "", err
		}
		key, s = strings.TrimSpace(key), strings.TrimSpace(s)
		switch {
		case s == "" || isUnknownValue(strings.ToLower(s)):
		case key == "":
			parts = append(parts, s)
		default:
			parts = append(parts, key+": "+s)
		}
	}
	return strings.Join(parts, "; "), nil
}

func parseContext(raw json.RawMessage) ([]QA, error) {
	if raw == nil {
		return nil, nil
	}
	if firstByte(raw) != '[' {
		return nil, fmt.Errorf(`"context" is %s, not a list`, jsonKind(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New(`"context" is not valid JSON`)
	}
	var qas []QA
	for i, item := range items {
		if firstByte(item) != '{' {
			return nil, fmt.Errorf(`"context" item %d is %s, not an object`, i, jsonKind(item))
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil {
			return nil, fmt.Errorf(`"context" item %d is not valid JSON`, i)
		}
		q, okQ := qaField(fields, "q", "question")
		a, okA := qaField(fields, "a", "answer")
		if !okQ || !okA {
			return nil, fmt.Errorf(`"context" item %d has a "q" or "a" that is not a string`, i)
		}
		q, a = cleanModelText(q, maxQuestionRunes), cleanModelText(a, maxAnswerRunes)
		if blankPair(q, a) || len(qas) == maxContextPairs {
			continue
		}
		qas = append(qas, QA{Q: q, A: a})
	}
	return qas, nil
}

// blankPair reports whether a context pair, cleaned, lacks its question or
// its answer (empty, null or white space): a question without an answer
// says nothing to inject, and an answer without its question cannot be
// found. Such a pair is dropped, not the reply.
func blankPair(q, a string) bool {
	return strings.TrimSpace(q) == "" || strings.TrimSpace(a) == ""
}

// qaField returns the field called name, or alias when name is absent; a
// missing field is an empty string.
func qaField(fields map[string]json.RawMessage, name, alias string) (string, bool) {
	v, ok := fields[name]
	if !ok {
		if v, ok = fields[alias]; !ok {
			return "", true
		}
	}
	return scalarString(v)
}

// scalarString returns the text of a JSON string, number or boolean, and ""
// for null. It reports false for objects and arrays.
func scalarString(v json.RawMessage) (string, bool) {
	switch c := firstByte(v); {
	case c == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false
		}
		return s, true
	case c == 'n':
		return "", isNull(v)
	case c == 't' || c == 'f':
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return "", false
		}
		if b {
			return "true", true
		}
		return "false", true
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", false
		}
		return n.String(), true
	}
	return "", false
}

// cleanModelText makes model text safe to store: valid UTF-8, no NULs, no
// memory markers echoed back, trimmed and bounded.
func cleanModelText(s string, maxRunes int) string {
	s = StripMarkers(sanitize(s))
	if utf8.RuneCountInString(s) > maxRunes {
		s = strings.TrimSpace(truncateRunes(s, maxRunes))
	}
	return s
}

func firstByte(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func isNull(v json.RawMessage) bool {
	return string(bytes.TrimSpace(v)) == "null"
}

// jsonKind names the kind of a JSON value for error messages.
func jsonKind(v json.RawMessage) string {
	switch c := firstByte(v); {
	case c == '{':
		return "an object"
	case c == '[':
		return "a list"
	case c == '"':
		return "a string"
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
