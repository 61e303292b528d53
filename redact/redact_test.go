package redact

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		in    string
		want  string
		kinds []Kind
	}{
		// Stated secrets.
		{name: "password", in: "my password is hunter2 and my card is 4111 1111 1111 1111",
			want:  "my password is [redacted:password] and my card is [redacted:card]",
			kinds: []Kind{Card, Password}},
		{name: "password colon", in: "Password: Tr0ub4dor&3.", want: "Password: [redacted:password]."},
		{name: "password equals", in: "pwd=s3cr3t!", want: "pwd=[redacted:password]!"},
		{name: "password for", in: "the password for my wifi is BlueSky42, thanks", want: "the password for my wifi is [redacted:password], thanks"},
		{name: "password now", in: "my password is now hunter3", want: "my password is now [redacted:password]"},
		{name: "password quoted", in: `my passphrase is "correct horse battery staple" ok`, want: `my passphrase is [redacted:password] ok`},
		{name: "password curly quoted", in: "passcode is “open sesame”", want: "passcode is [redacted:password]"},
		{name: "password unclosed quote", in: `password is "hunter2`, want: `password is [redacted:password]`},
		{name: "password possessive", in: "my password's length is 12", want: "my password's length is 12"},
		{name: "pin", in: "My PIN is 4821", want: "My PIN is [redacted:password]"},
		{name: "pin code", in: "the pin code for the door: 1234#", want: "the pin code for the door: [redacted:password]"},
		{name: "cvv", in: "cvv 123? no, CVV is 123", want: "cvv 123? no, CVV is [redacted:password]"},
		{name: "german", in: "Mein Passwort ist geheim123", want: "Mein Passwort ist [redacted:password]"},
		{name: "french", in: "mon mot de passe est azerty", want: "mon mot de passe est [redacted:password]"},
		{name: "portuguese", in: "minha senha é abc123", want: "minha senha é [redacted:password]"},
		{name: "stated api key", in: "my api key is 12345-abcde", want: "my api key is [redacted:api_key]", kinds: []Kind{APIKey}},
		{name: "stated token", in: "access token: abcdef0123456789", want: "access token: [redacted:token]", kinds: []Kind{Token}},
		{name: "stated ssn", in: "my SSN is 123456789", want: "my SSN is [redacted:ssn]", kinds: []Kind{SSN}},
		// Shapes.
		{name: "openai key", in: "use sk-proj-abcDEF1234567890abcdef1234 please", want: "use [redacted:api_key] please"},
		{name: "openai key stated", in: "my key is sk-abcdefghijklmnopqrstuvwx", want: "my key is [redacted:api_key]"},
		{name: "password that is a key", in: "password: sk-abcdefghijklmnopqrstuvwx", want: "password: [redacted:api_key]", kinds: []Kind{APIKey}},
		{name: "github", in: "token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 leaked", want: "token [redacted:api_key] leaked"},
		{name: "aws", in: "AKIAIOSFODNN7EXAMPLE is the id", want: "[redacted:api_key] is the id"},
		{name: "slack", in: "xoxb-1234567890-abcdefghij", want: "[redacted:api_key]"},
		{name: "stripe", in: "sk_live_4eC39HqLyjWDarjtT1zdp7dc", want: "[redacted:api_key]"},
		{name: "google", in: "key=AIzaSyA1234567890abcdefghijklmnopqrstuv", want: "key=[redacted:api_key]"},
		{name: "jwt", in: "here: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
			want: "here: [redacted:token]", kinds: []Kind{Token}},
		{name: "bearer", in: "Authorization: Bearer abcdef1234567890ABCDEF", want: "Authorization: Bearer [redacted:token]"},
		{name: "url password", in: "connect to postgres://app:Sup3rS3cret@db.example.com/prod", want: "connect to postgres://app:[redacted:password]@db.example.com/prod"},
		{name: "private key", in: "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nbye",
			want: "key:\n[redacted:private_key]\nbye"},
		{name: "card dashes", in: "card 5500-0055-5555-5559 exp 12/27", want: "card [redacted:card] exp 12/27"},
		{name: "card plain", in: "4242424242424242", want: "[redacted:card]"},
		{name: "card amex", in: "amex 3782 822463 10005.", want: "amex [redacted:card]."},
		{name: "card followed by number", in: "card 4111 1111 1111 1111 2 times", want: "card [redacted:card] 2 times"},
		{name: "ssn", in: "SSN 123-45-6789.", want: "SSN [redacted:ssn].", kinds: []Kind{SSN}},
		{name: "iban grouped", in: "IBAN: DE89 3704 0044 0532 0130 00, bank X", want: "IBAN: [redacted:iban], bank X"},
		{name: "iban letters", in: "send to GB82 WEST 1234 5698 7654 32 BANK", want: "send to [redacted:iban] BANK"},
		{name: "iban compact", in: "NL91ABNA0417164300", want: "[redacted:iban]"},
		{name: "idempotent", in: "my password is [redacted:password]", want: "my password is [redacted:password]"},

		// Near misses: left alone.
		{name: "password prose", in: "my password is too short, I forgot my password", want: "my password is too short, I forgot my password"},
		{name: "password question", in: "what is my password?", want: "what is my password?"},
		{name: "password reset", in: "My password was reset yesterday", want: "My password was reset yesterday"},
		{name: "pin location", in: "the pin is in the drawer", want: "the pin is in the drawer"},
		{name: "token prose", in: "the token is valid until May", want: "the token is valid until May"},
		{name: "card failing luhn", in: "4111 1111 1111 1112", want: "4111 1111 1111 1112"},
		{name: "order number", in: "order 1234567890123456 shipped", want: "order 1234567890123456 shipped"},
		{name: "timestamp ms", in: "at 1700000000000", want: "at 1700000000000"},
		{name: "phone us", in: "call +1 415 555 2671 or 415-555-2671", want: "call +1 415 555 2671 or 415-555-2671"},
		{name: "phone intl", in: "+44 20 7946 0958", want: "+44 20 7946 0958"},
		{name: "phone long", in: "+49 30 901820 1234567", want: "+49 30 901820 1234567"},
		{name: "date", in: "born 1990-04-12, moved 12/05/2023", want: "born 1990-04-12, moved 12/05/2023"},
		{name: "isbn", in: "ISBN 978-3-16-148410-0", want: "ISBN 978-3-16-148410-0"},
		{name: "amount", in: "I owe 4,111,111,111,111.11 dollars", want: "I owe 4,111,111,111,111.11 dollars"},
		{name: "version", in: "version 4.1111111111111111", want: "version 4.1111111111111111"},
		{name: "invalid ssn area", in: "000-12-3456 and 666-12-3456 and 912-34-5678", want: "000-12-3456 and 666-12-3456 and 912-34-5678"},
		{name: "ssn in longer number", in: "ref 1-123-45-6789-2", want: "ref 1-123-45-6789-2"},
		{name: "iban bad checksum", in: "DE89 3704 0044 0532 0130 01", want: "DE89 3704 0044 0532 0130 01"},
		{name: "iban-like word", in: "DE12 is a road", want: "DE12 is a road"},
		{name: "sk words", in: "risk-free sk-learn ask-me-anything task-1234", want: "risk-free sk-learn ask-me-anything task-1234"},
		{name: "git sha", in: "commit e83c5163316f89bfbde7d9ab23ca2e25604af290", want: "commit e83c5163316f89bfbde7d9ab23ca2e25604af290"},
		{name: "uuid", in: "id 123e4567-e89b-12d3-a456-426614174000", want: "id 123e4567-e89b-12d3-a456-426614174000"},
		{name: "bearer word", in: "the bearer of bad news", want: "the bearer of bad news"},
		{name: "url without password", in: "https://user@example.com/a:b@c", want: "https://user@example.com/a:b@c"},
		{name: "plain text", in: "I'm allergic to peanuts and live in Lisbon", want: "I'm allergic to peanuts and live in Lisbon"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, kinds := Text(tt.in)
			if got != tt.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if tt.kinds != nil && !slices.Equal(sortedKinds(kinds), sortedKinds(tt.kinds)) {
				t.Errorf("Text(%q) kinds = %v, want %v", tt.in, kinds, tt.kinds)
			}
			if (got == tt.in) != (len(kinds) == 0) {
				t.Errorf("Text(%q) changed=%v but reported %d spans", tt.in, got != tt.in, len(kinds))
			}
			if again, more := Text(got); again != got || len(more) != 0 {
				t.Errorf("Redact is not idempotent on %q: %q, %v", got, again, more)
			}
		})
	}
}

func sortedKinds(k []Kind) []Kind {
	k = slices.Clone(k)
	slices.Sort(k)
	return k
}

func TestFact(t *testing.T) {
	t.Parallel()

	tests := []struct {
		key, value string
		want       string
		keep       bool
	}{
		{key: "password", value: "hunter2", want: "[redacted:password]"},
		{key: "bank_pin", value: "4821", want: "[redacted:password]"},
		{key: "github_token", value: "abc", want: "[redacted:token]"},
		{key: "openai_api_key", value: "whatever", want: "[redacted:api_key]"},
		{key: "ssn", value: "123 45 6789", want: "[redacted:ssn]"},
		{key: "credit_card", value: "4111-1111-1111-1111", want: "[redacted:card]"},
		{key: "credit_card", value: "Visa ending 1111", want: "Visa ending 1111", keep: true},
		{key: "note", value: "wifi password is BlueSky42", want: "wifi password is [redacted:password]", keep: true},
		{key: "name", value: "Ana", want: "Ana", keep: true},
		{key: "spinach", value: "likes it", want: "likes it", keep: true},
		{key: "favorite_token", value: "a coin", want: "a coin", keep: true},
		{key: "password", value: "[redacted:password]", want: "[redacted:password]"},
		// Emoji are content, not punctuation (a walk: "🐶🐶" was dropped).
		{key: "pets", value: "🐶🐶", want: "🐶🐶", keep: true},
		{key: "mood", value: "❤️", want: "❤️", keep: true},
		{key: "password", value: "🐶🐶", want: "[redacted:password]"},
		{key: "note", value: " -- !? ", want: " -- !? "},
	}
	for _, tt := range tests {
		got, kinds, keep := Fact(tt.key, tt.value)
		if got != tt.want || keep != tt.keep {
			t.Errorf("Fact(%q, %q) = %q, keep %v; want %q, keep %v", tt.key, tt.value, got, keep, tt.want, tt.keep)
		}
		if strings.Contains(got, MarkerPrefix) != (len(kinds) > 0) && tt.value != "[redacted:password]" {
			t.Errorf("Fact(%q, %q) kinds = %v", tt.key, tt.value, kinds)
		}
	}
}

// FuzzText: on any text Text terminates, keeps valid UTF-8 valid,
// reports a span for every change, and is idempotent.
func FuzzText(f *testing.F) {
	for _, s := range []string{"my password is hunter2", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
		`pin: "1234`, "sk-abcdefghijklmnopqrstuvwx", "-----BEGIN PRIVATE KEY-----", "123-45-6789", "[redacted:card]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, kinds := Text(s)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q, not valid UTF-8", s, got)
		}
		if (got != s) != (len(kinds) > 0) {
			t.Fatalf("Text(%q) = %q with %d spans", s, got, len(kinds))
		}
		if again, more := Text(got); again != got || len(more) > 0 {
			t.Fatalf("Text(%q) = %q, then %q", s, got, again)
		}
	})
}

func BenchmarkRedact(b *testing.B) {
	msg := strings.Repeat("I moved to Lisbon last year and work at a bakery; my order 12345 ships on 2026-11-21. ", 48) +
		"my password is hunter2 and my card is 4111 1111 1111 1111"
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		Text(msg)
	}
}

// BenchmarkRedactClean: the common case, a turn holding nothing to redact.
func BenchmarkRedactClean(b *testing.B) {
	msg := strings.Repeat("I moved to Lisbon last year and work at a bakery; my order 12345 ships on 2026-11-21. ", 48)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		Text(msg)
	}
}

// TestKindsListsEveryKind: Kinds (the metrics show each at 0 from the
// start) names every Kind constant of the package.
func TestKindsListsEveryKind(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "redact.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []Kind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				s, _ := strconv.Unquote(lit.Value)
				consts = append(consts, Kind(s))
			}
		}
	}
	if len(consts) == 0 || !slices.Equal(sortedKinds(consts), sortedKinds(Kinds())) {
		t.Fatalf("Kinds() = %v; the package's Kind constants are %v", Kinds(), consts)
	}
}
