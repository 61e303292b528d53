package app

import (
	"strings"
	"testing"
)

// TestRedactURL: every form of connection string pgx and nats.go accept,
// and a model server's URL, keeps its secrets out of what memoryd prints;
// what is not secret stays readable.
func TestRedactURL(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"postgres://u:PW1@db:5432/memoryd?sslmode=disable", "postgres://u:xxxxx@db:5432/memoryd?sslmode=disable"},
		{"postgres://u@db/memoryd?password=PW2&sslmode=disable", "postgres://u@db/memoryd?password=xxxxx&sslmode=disable"},
		{"postgres://u@db/memoryd?sslmode=verify-full&sslpassword=PW3", "postgres://u@db/memoryd?sslmode=verify-full&sslpassword=xxxxx"},
		{"host=db user=u password=PW4 dbname=memoryd", "host=db user=u password=xxxxx dbname=memoryd"},
		{"host=db password='P W5\\'x' dbname=memoryd", "host=db password=xxxxx dbname=memoryd"},
		{"host=db PASSWORD = PW6 dbname=memoryd", "host=db PASSWORD = xxxxx dbname=memoryd"},
		{"http://127.0.0.1:8000/v1?api_key=KEY7", "http://127.0.0.1:8000/v1?api_key=xxxxx"},
		{"https://x.example/v1?key=KEY8&alt=json", "https://x.example/v1?key=xxxxx&alt=json"},
		{"nats://a:PW9@n1:4222,nats://a:PW9@n2:4222", "nats://a:xxxxx@n1:4222,nats://a:xxxxx@n2:4222"},
		{"nats://tok%zzPW10@n1:4222", "nats://xxxxx@n1:4222"},
		{"http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"},
		// A comma, ';' or '&' in a password (pgx reads a keyword's value
		// up to unquoted whitespace; a URL's userinfo may hold a comma).
		{"host=db password='PW11,x y' dbname=memoryd", "host=db password=xxxxx dbname=memoryd"},
		{"host=db password=PW12;PW12&PW12 dbname=memoryd", "host=db password=xxxxx dbname=memoryd"},
		{`host=db password=PW13\ PW13 dbname=memoryd`, "host=db password=xxxxx dbname=memoryd"},
		{"postgres://u:PW14,PW14@db/memoryd", "postgres://u:xxxxx@db/memoryd"},
		{"host=h1,h2 port=5432,5433 password=PW15 dbname=memoryd", "host=h1,h2 port=5432,5433 password=xxxxx dbname=memoryd"},
		// nats.go sends a NATS URL's user without a password as the token.
		{"nats://TOKEN16@n1:4222,tls://TOKEN16@n2:4222", "nats://xxxxx@n1:4222,tls://xxxxx@n2:4222"},
		{"http://user@x.example/v1", "http://user@x.example/v1"},
		{"host=db dbname=memoryd sslmode=disable", "host=db dbname=memoryd sslmode=disable"},
		{"postgres://u@db/monkey?application_name=keyring", "postgres://u@db/monkey?application_name=keyring"},
	} {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"PW", "KEY", "TOKEN"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q: holds %s", c.in, got, secret)
			}
		}
	}
}
