// Package redact finds passwords, keys, tokens, payment card numbers and
// government ids in text and replaces each span by a marker
// "[redacted:<kind>]" (docs/operations.md, "Sensitive data"): a turn's
// text as it is recorded, what an extraction returns, the facts a prompt
// shows and a query sent to the embeddings server go through it; what a
// frontend writes on purpose is kept as written.
package redact

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind names the kind of data a redacted span held. Its value is the
// word in the span's marker, "[redacted:<kind>]" (docs/protocol.md,
// "Redacted spans").
type Kind string

// The kinds of sensitive data [Text] removes.
const (
	// Password is the value of a stated password, passphrase, PIN or
	// security code ("my password is X", "pin: X"), or the password in a
	// URL's user info ("https://user:X@host").
	Password Kind = "password"
	// APIKey is a key in a known vendor format (sk-..., ghp_...,
	// AKIA..., xoxb-..., AIza..., glpat-..., npm_...) or a stated API key.
	APIKey Kind = "api_key"
	// Token is a JWT, a bearer token, or a stated access token.
	Token Kind = "token"
	// PrivateKey is a PEM private key block.
	PrivateKey Kind = "private_key"
	// Card is a payment card number: 13 to 19 digits, optionally grouped
	// by single spaces or dashes, starting with 2 to 6, passing the Luhn check.
	Card Kind = "card"
	// SSN is a US social security number ddd-dd-dddd with a valid area,
	// group and serial, or a stated SSN.
	SSN Kind = "ssn"
	// IBAN is an IBAN with its country's length and a valid checksum.
	IBAN Kind = "iban"
)

// Kinds returns every Kind [Text] and [Fact] report, for metrics that show
// each at 0 before its first redaction.
func Kinds() []Kind { return []Kind{Password, APIKey, Token, PrivateKey, Card, SSN, IBAN} }

// MarkerPrefix starts every redaction marker.
const MarkerPrefix = "[redacted:"

// Marker is the text that replaces a span of kind k: "[redacted:<k>]".
func Marker(k Kind) string { return MarkerPrefix + string(k) + "]" }

var (
	privateKeyRE = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)
	// apiKeyRE matches vendor key formats by their documented prefixes;
	// the lengths keep words such as "sk-learn" out.
	apiKeyRE = regexp.MustCompile(`\b(?:` +
		`sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{20,}` + // OpenAI, Anthropic
		`|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}` + // Stripe
		`|gh[pousr]_[A-Za-z0-9]{30,}` + // GitHub
		`|github_pat_[A-Za-z0-9_]{40,}` +
		`|(?:AKIA|ASIA)[0-9A-Z]{16}` + // AWS access key id
		`|xox[abprs]-[A-Za-z0-9-]{10,}` + // Slack
		`|AIza[0-9A-Za-z_-]{35}` + // Google
		`|glpat-[A-Za-z0-9_-]{20,}` + // GitLab
		`|npm_[A-Za-z0-9]{36}` +
		`)`)
	jwtRE    = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)
	bearerRE = regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)`)
	// urlUserInfoRE finds the password of scheme://user:password@host.
	urlUserInfoRE = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:([^\s@/\[]+)@`)
	// statementRE finds a stated secret: a keyword, optionally "for/of X",
	// then "is", "=", ":" and the like, and optional filler. The value
	// itself is taken in code (statedValue).
	statementRE = regexp.MustCompile(`(?i)\b(` +
		`pass(?:word|code|phrase)s?|pass\s+word|passwort|pwd|mot\s+de\s+passe|contraseña|senha|wachtwoord` +
		`|pin(?:\s+(?:code|number))?|secret\s+(?:code|key)|security\s+code|cvv2?|cvc` +
		`|api[\s_-]?key|(?:access|auth|api|refresh|bearer)[\s_-]?token|token` +
		`|ssn|social\s+security\s+(?:number|no\.?)` +
		`)(?:\s+(?:for|of|to|on|at)\s+(?:my\s+|the\s+|our\s+)?[\p{L}\p{N}._-]+)?` +
		`\s*(?:\bis\b|\bwas\b|\bist\b|\best\b|\bes\b|é\s|=|:)\s*` +
		`(?:(?:now|still|just|actually|currently|also|literally|simply)\s+)*`)
)

// statedKind is the kind of the secret a statement's keyword names.
func statedKind(keyword string) Kind {
	k := strings.ToLower(keyword)
	switch {
	case strings.HasPrefix(k, "ssn"), strings.HasPrefix(k, "social"):
		return SSN
	case strings.HasPrefix(k, "api") && strings.Contains(k, "key"):
		return APIKey
	case strings.Contains(k, "token"):
		return Token
	}
	return Password
}

// notSecretWords are first words of a stated "value" that describe the
// secret instead of being it ("my password is too short", "the pin is in
// the drawer"); such statements are left alone.
var notSecretWords = map[string]bool{
	"a": true, "an": true, "the": true, "my": true, "your": true, "his": true, "her": true, "our": true, "their": true,
	"not": true, "too": true, "very": true, "so": true, "that": true, "this": true, "it": true, "same": true,
	"different": true, "wrong": true, "incorrect": true, "correct": true, "right": true, "weak": true, "strong": true,
	"expired": true, "invalid": true, "valid": true, "required": true, "missing": true, "empty": true, "blank": true,
	"set": true, "changed": true, "reset": true, "long": true, "short": true, "secure": true, "safe": true,
	"in": true, "on": true, "at": true, "under": true, "stored": true, "saved": true, "written": true, "hidden": true,
	"private": true, "secret": true, "protected": true, "locked": true, "there": true, "here": true, "what": true,
	"which": true, "something": true, "easy": true, "hard": true, "simple": true, "complicated": true,
	"forgotten": true, "lost": true, "case-sensitive": true, "needed": true, "generated": true, "sent": true,
	"and": true, "or": true, "but": true, "because": true, "for": true, "of": true, "to": true, "with": true,
	"been": true, "being": true, "no": true, "none": true, "unknown": true, "something?": true, "used": true,
	"working": true, "broken": true, "ok": true, "okay": true, "fine": true, "good": true, "bad": true,
	"mandatory": true, "optional": true, "necessary": true, "displayed": true, "shown": true, "encrypted": true,
	"hashed": true, "still": true, "now": true, "just": true, "only": true, "also": true, "always": true, "never": true,
}

// maxStatedWord bounds an unquoted stated value; a longer one is redacted
// up to that length.
const maxStatedWord = 256

// maxQuotedSecret bounds a quoted stated value ("my password is 'correct
// horse battery staple'"); a longer quote is taken for prose, not a secret.
const maxQuotedSecret = 100

// statedValue returns the end (exclusive) of the secret that starts at s[i:]
// after a statement, or -1 when there is none: a quoted string, or one run
// of non-space characters without trailing punctuation.
func statedValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	rest := s[i:]
	if strings.HasPrefix(rest, MarkerPrefix) {
		return -1 // already redacted by a shape rule
	}
	r, size := utf8.DecodeRuneInString(rest)
	if closing, ok := quotePairs[r]; ok {
		j := strings.IndexRune(rest[size:min(len(rest), size+maxQuotedSecret+1)], closing)
		if j == 0 {
			return -1
		}
		if j > 0 {
			return i + size + j + utf8.RuneLen(closing)
		}
		// Never closed: the word after the quote, quote included.
		if end := statedWord(s, i+size); end > i+size {
			return end
		}
		return -1
	}
	return statedWord(s, i)
}

// statedWord returns the end of the run of non-space characters at s[i:],
// without trailing punctuation, or -1 when it is empty or a word that
// describes the secret (notSecretWords).
func statedWord(s string, i int) int {
	rest := s[i:]
	if len(rest) > maxStatedWord {
		// Bounded, so that a text of statements without spaces is not
		// scanned to its end for each.
		n := maxStatedWord
		for n > 0 && !utf8.RuneStart(rest[n]) {
			n--
		}
		rest = rest[:n]
	}
	end := len(rest)
	for j, c := range rest {
		if unicode.IsSpace(c) {
			end = j
			break
		}
	}
	word := strings.TrimRight(rest[:end], ".,;:!?)]}\"'’”")
	if word == "" || notSecretWords[strings.ToLower(word)] || strings.HasPrefix(word, "?") {
		return -1
	}
	return i + len(word)
}

var quotePairs = map[rune]rune{'"': '"', '\'': '\'', '`': '`', '“': '”', '‘': '’', '«': '»', '„': '“'}

// span is one part of a text to replace by kind's marker.
type span struct {
	start, end int
	kind       Kind
}

// Text replaces the sensitive data in text by markers "[redacted:<kind>]"
// and returns the redacted text and the kind of each replaced span, in the
// order found (nil when nothing was). Everything outside the spans is kept
// byte for byte. Text is deterministic and idempotent: a marker is never
// redacted again.
//
// What it catches and what it deliberately leaves alone is documented in
// docs/operations.md ("Sensitive data"): shapes are matched strictly (a
// checksum where the format has one) so that ordinary numbers, dates, phone
// numbers and prose survive.
func Text(text string) (string, []Kind) {
	var kinds []Kind
	// The rules run in turn over the text redacted so far, the most
	// specific shapes first, so that a stated "password is sk-..." counts as
	// an API key once.
	apply := func(find func(string) []span) {
		spans := find(text)
		if len(spans) == 0 {
			return
		}
		var b strings.Builder
		last := 0
		for _, sp := range spans {
			if sp.start < last {
				continue // overlaps a span already taken
			}
			b.WriteString(text[last:sp.start])
			b.WriteString(Marker(sp.kind))
			last = sp.end
			kinds = append(kinds, sp.kind)
		}
		b.WriteString(text[last:])
		text = b.String()
	}
	// Cheap tests on the text as given decide which rules can match at all:
	// most turns hold none of them, and Go's regexps cost about a
	// microsecond per kilobyte each. A rule that is skipped could not have
	// matched; markers added meanwhile never make one match.
	lower := asciiLower(text)
	digits := 0
	for i := 0; i < len(text); i++ {
		if isDigit(text[i]) {
			digits++
		}
	}
	if strings.Contains(text, "PRIVATE KEY") {
		apply(regexSpans(privateKeyRE, PrivateKey, 0))
	}
	if containsAny(text, apiKeyPrefixes) {
		apply(regexSpans(apiKeyRE, APIKey, 0))
	}
	if strings.Contains(text, "eyJ") {
		apply(regexSpans(jwtRE, Token, 0))
	}
	if strings.Contains(lower, "bearer") {
		apply(regexSpans(bearerRE, Token, 1))
	}
	if strings.Contains(text, "://") {
		apply(regexSpans(urlUserInfoRE, Password, 1))
	}
	if digits >= 2 {
		apply(ibanSpans)
	}
	if digits >= 13 {
		apply(cardSpans)
	}
	if digits >= 9 && strings.IndexByte(text, '-') >= 0 {
		apply(ssnSpans)
	}
	if containsAny(lower, statementStems) {
		apply(statedSpans)
	}
	return text, kinds
}

// apiKeyPrefixes are what every match of apiKeyRE contains.
var apiKeyPrefixes = []string{"sk-", "sk_", "rk_", "gho_", "ghp_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox", "AIza", "glpat-", "npm_"}

// statementStems are what every match of statementRE contains, lowercased.
var statementStems = []string{"pass", "pwd", "mot de", "contrase", "senha", "wachtwoord", "pin", "secret", "security", "cvv", "cvc",
	"api", "token", "ssn", "social"}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// regexSpans finds re's matches (or their submatch group) as spans of kind.
func regexSpans(re *regexp.Regexp, kind Kind, group int) func(string) []span {
	return func(s string) []span {
		var out []span
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			if m[2*group] >= 0 {
				out = append(out, span{m[2*group], m[2*group+1], kind})
			}
		}
		return out
	}
}

// statedSpans runs statementRE only around the places a keyword may start
// (its stems, found by plain search), not over the whole text. Overlapping
// windows are merged, so each byte is matched at most once.
func statedSpans(s string) []span {
	lower := asciiLower(s)
	var stems []int
	for _, stem := range statementStems {
		for from := 0; ; {
			p := strings.Index(lower[from:], stem)
			if p < 0 {
				break
			}
			stems = append(stems, from+p)
			from += p + len(stem)
		}
	}
	slices.Sort(stems)
	var out []span
	for k := 0; k < len(stems); {
		// From the start of the word holding the stem ("access token"
		// starts a word earlier; statementRE's \b needs the word's start),
		// to well past the longest statement, merged with the windows of
		// the stems inside it.
		w := max(0, stems[k]-statementLookBehind)
		for w > 0 && isWordByte(s[w-1]) {
			w--
		}
		end := min(len(s), stems[k]+statementLookAhead)
		for k++; k < len(stems) && stems[k]-statementLookBehind <= end; k++ {
			end = min(len(s), stems[k]+statementLookAhead)
		}
		for _, m := range statementRE.FindAllStringSubmatchIndex(s[w:end], -1) {
			valueAt := w + m[1]
			if e := statedValue(s, valueAt); e > valueAt {
				out = append(out, span{valueAt, e, statedKind(s[w+m[2] : w+m[3]])})
			}
		}
	}
	return out
}

// The window statementRE is run in around a stem: a keyword's start lies at
// most statementLookBehind bytes before its stem ("social security no" has
// its stem first, "access token" 7 bytes after), and a statement is shorter
// than statementLookAhead bytes.
const (
	statementLookBehind = 16
	statementLookAhead  = 256
)

func isWordByte(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// asciiLower lowercases ASCII letters only, so that byte offsets in the
// result are offsets in s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func ssnSpans(s string) []span {
	var out []span
	for _, m := range ssnCandidates(s) {
		area, group, serial := s[m[0]:m[0]+3], s[m[0]+4:m[0]+6], s[m[0]+7:m[1]]
		// Never issued: area 000, 666 or 9xx, group 00, serial 0000.
		if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
			continue
		}
		// A neighbouring digit or dash makes it part of a longer number
		// ("1-123-45-6789").
		if m[0] > 0 && (s[m[0]-1] == '-' || s[m[0]-1] == '/') || m[1] < len(s) && (s[m[1]] == '-' || s[m[1]] == '/') {
			continue
		}
		out = append(out, span{m[0], m[1], SSN})
	}
	return out
}

// ssnCandidates finds ddd-dd-dddd between word boundaries, by hand (a
// regexp pass over every turn costs more than the rest of Text).
func ssnCandidates(s string) [][2]int {
	var out [][2]int
	for from := 0; ; {
		p := strings.IndexByte(s[from:], '-')
		if p < 0 {
			return out
		}
		p += from
		from = p + 1
		start, end := p-3, p+8
		if start < 0 || end > len(s) || start > 0 && isWordByte(s[start-1]) || end < len(s) && isWordByte(s[end]) {
			continue
		}
		c := s[start:end]
		if allDigits(c[0:3]) && allDigits(c[4:6]) && c[6] == '-' && allDigits(c[7:11]) {
			out = append(out, [2]int{start, end})
		}
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// cardSpans finds candidate card numbers by hand (a regexp
// pass costs more than the rest of Text): from a digit not preceded by one,
// digits with at most one space or dash between two of them, up to 19
// digits. The boundaries, the grouping and the Luhn check decide.
func cardSpans(s string) []span {
	var out []span
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) || i > 0 && isDigit(s[i-1]) {
			continue
		}
		end, n := i+1, 1
		for end < len(s) && n < 19 {
			if isDigit(s[end]) {
				end++
				n++
			} else if (s[end] == ' ' || s[end] == '-') && end+1 < len(s) && isDigit(s[end+1]) {
				end += 2
				n++
			} else {
				break
			}
		}
		if n < 13 {
			i = end - 1
			continue
		}
		out = append(out, cardSpan(s, i, end)...)
		i = end - 1
	}
	return out
}

// cardSpan checks the candidate s[start:end].
func cardSpan(s string, start, end int) []span {
	// Part of a longer token: a digit, letter, '+', '.', '/' or a
	// separator right before or after (phone numbers, amounts,
	// versions, dates).
	if start > 0 && isNumberNeighbour(s[start-1], start > 1 && isDigit(s[start-2])) ||
		end < len(s) && isNumberNeighbour(s[end], end+1 < len(s) && isDigit(s[end+1])) {
		return nil
	}
	if isCardNumber(s[start:end]) {
		return []span{{start, end, Card}}
	}
	// A greedy match may have taken a following number's group too
	// ("4111 1111 1111 1111 2"): try once without its last group.
	if j := strings.LastIndexAny(s[start:end], " -"); j > 0 && isCardNumber(s[start:start+j]) {
		return []span{{start, start + j, Card}}
	}
	return nil
}

// isNumberNeighbour reports whether c, next to a candidate number, makes it
// part of a longer token; '.' and ',' do only between digits (beyond is the
// digit on c's other side), so a card number may end a sentence.
func isNumberNeighbour(c byte, beyond bool) bool {
	if c == '.' || c == ',' {
		return beyond
	}
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '+' || c == '/' || c == '-' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isCardNumber reports whether s (digits, optionally grouped by one kind of
// single separator into groups of 4 to 6 digits, the last 1 to 6) is a
// payment card number.
func isCardNumber(s string) bool {
	var digits []byte
	sep := byte(0)
	group, groups := 0, []int{}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits = append(digits, c)
			group++
			continue
		}
		if sep != 0 && c != sep {
			return false // mixed separators
		}
		sep = c
		groups = append(groups, group)
		group = 0
	}
	groups = append(groups, group)
	if len(digits) < 13 || len(digits) > 19 || digits[0] < '2' || digits[0] > '6' {
		return false
	}
	if len(groups) > 1 {
		for i, g := range groups {
			if g > 6 || g < 4 && i < len(groups)-1 {
				return false
			}
		}
	}
	return luhn(digits)
}

// luhn reports whether the digits pass the Luhn check.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// ibanLengths are the IBAN lengths of the countries whose IBANs are
// recognised (the ECBS/SWIFT registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21,
	"CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18,
	"FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23,
	"IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27,
	"MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29,
	"PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26,
	"UA": 29, "VG": 24, "XK": 20,
}

// ibanSpans finds IBANs, written together or in groups separated by single
// spaces: exactly the country's length of letters and digits, then a word
// boundary, with a valid mod-97 checksum.
func ibanSpans(s string) []span {
	var out []span
	for _, m := range ibanStarts(s) {
		n, ok := ibanLengths[s[m[0]:m[0]+2]]
		if !ok {
			continue
		}
		var chars []byte
		i := m[0]
		for i < len(s) && len(chars) < n {
			if c := s[i]; isIBANUpper(c) {
				chars = append(chars, c)
			} else if c != ' ' || i+1 == len(s) || !isIBANUpper(s[i+1]) {
				break
			}
			i++
		}
		if len(chars) != n || i < len(s) && isIBANChar(s[i]) {
			continue
		}
		if ibanChecksumOK(chars) {
			out = append(out, span{m[0], i, IBAN})
		}
	}
	return out
}

// ibanStarts finds where an IBAN may start: two uppercase letters and two
// digits, not preceded by a letter, digit or '_' (as ibanRE's \b would
// require, but without a regexp pass over every turn).
func ibanStarts(s string) [][2]int {
	var out [][2]int
	for i := 0; i+4 <= len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' || s[i+1] < 'A' || s[i+1] > 'Z' || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
			continue
		}
		if i > 0 && (isIBANChar(s[i-1]) || s[i-1] == '_') {
			continue
		}
		out = append(out, [2]int{i, i + 4})
	}
	return out
}

func isIBANUpper(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' }

func isIBANChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

// ibanChecksumOK computes ISO 13616's mod 97 over the IBAN with its first
// four characters moved to the end and letters as 10..35.
func ibanChecksumOK(iban []byte) bool {
	rearranged := append(append([]byte{}, iban[4:]...), iban[:4]...)
	rem := 0
	for _, c := range rearranged {
		if c >= 'A' && c <= 'Z' {
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		} else {
			rem = (rem*10 + int(c-'0')) % 97
		}
	}
	return rem == 1
}

// secretKeyKind reports whether a fact key names a secret whose whole value
// is sensitive ("password", "bank_pin", "api_key", "ssn"), and which.
func secretKeyKind(key string) (Kind, bool) {
	words := strings.Split(key, "_")
	has := func(w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	switch {
	case has("password") || has("passwords") || has("passcode") || has("passphrase") || has("pwd") || has("pin") ||
		has("cvv") || has("cvc") || strings.Contains(key, "secret_code") || strings.Contains(key, "security_code"):
		return Password, true
	case strings.Contains(key, "api_key") || strings.Contains(key, "apikey") || strings.Contains(key, "secret_key") ||
		strings.Contains(key, "access_key"):
		return APIKey, true
	case key == "token" || strings.HasSuffix(key, "_token") && !strings.HasPrefix(key, "favorite_"):
		return Token, true
	case has("ssn") || strings.Contains(key, "social_security"):
		return SSN, true
	case strings.Contains(key, "private_key"):
		return PrivateKey, true
	}
	return "", false
}

// Fact redacts a fact's value: all of it when the key names a secret
// (a "password" fact holds nothing else), else the spans [Text] finds. It
// reports ok=false when nothing but markers, spaces and punctuation is left:
// such a fact says nothing and is not stored.
func Fact(key, value string) (redacted string, kinds []Kind, ok bool) {
	if k, secret := secretKeyKind(key); secret && !onlyMarkers(value) {
		return Marker(k), []Kind{k}, false
	}
	redacted, kinds = Text(value)
	return redacted, kinds, !onlyMarkers(redacted)
}

// onlyMarkers reports whether s holds nothing but redaction markers, spaces
// and punctuation. A symbol of the "other" category (an emoji, a
// pictograph, a flag's letters) is content: a value of only "🐶🐶" says
// something, and was dropped as punctuation.
func onlyMarkers(s string) bool {
	for {
		i := strings.Index(s, MarkerPrefix)
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			break
		}
		s = s[:i] + " " + s[i+j+1:]
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.So, r) {
			return false
		}
	}
	return true
}
