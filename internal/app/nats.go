package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/secretfile"
)

// natsMaxPingsOut and NATSConfig.PingInterval bound how long a connection
// whose server stopped answering is kept: it is dropped (and reconnected)
// after natsMaxPingsOut+1 ping intervals without an answer, at most.
const natsMaxPingsOut = 2

// Connect connects with the configured credentials. The connection
// reconnects forever (a memory service outlives NATS restarts); the caller
// closes it. A failure to connect is a *NATSConnectError.
func (c NATSConfig) Connect(logger *slog.Logger) (*nats.Conn, error) {
	c = c.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		// Credentials the server refuses (an authorization violation, an
		// expired or revoked user) are retried as any other failure to
		// reconnect: nats.go otherwise closes the connection for good at
		// the second refusal in a row, and a password changed in the
		// server's configuration before memoryd had it, or a wrong
		// configuration rolled back, left serve not connected until it
		// was restarted (a rotation walk: /readyz "not connected:
		// CLOSED" while /healthz said ok). Files read at each connect
		// (TLS certificates, a .creds file, a password or token file)
		// are read again, so a renewed one is taken without a restart.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
		// A connection that stops answering without closing (the server's
		// host lost, a partition, a NAT or load balancer forgetting it) is
		// found by pings alone: with nats.go's defaults (every 2 minutes,
		// 2 unanswered) after 4 to 6 minutes, during which this process
		// answered no request and read no turn while its /readyz said
		// "ok". Now within 20 to 30 s, then it reconnects.
		nats.PingInterval(c.PingInterval),
		nats.MaxPingsOutstanding(natsMaxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// The server's asynchronous errors (a permissions violation, a
		// slow consumer) in the log, not as nats.go's plain line on
		// stderr in the middle of a JSON log (a TypeScript walk saw one
		// after a NATS restart).
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				logger.Warn("nats error", "subject", sub.Subject, "error", err)
				return
			}
			if refusedCredentials(err) {
				// At every reconnect, 4 a second (IgnoreAuthErrorAbort):
				// a line the process's handler holds back.
				logger.Warn(MsgNATSRefused, "error", err)
				return
			}
			if tlsRefused(err) {
				// At every reconnect too (a rotation walk: about once a
				// second, each a "nats error" line).
				logger.Warn(MsgNATSTLSRefused, "error", err)
				return
			}
			logger.Warn("nats error", "error", err)
		}),
		// Every request or turn the server refuses is told, not only the
		// last of those at once (the proxy's publishes, many users'). After
		// the handler above, which it passes every error on to.
		events.TrackViolations(),
	}
	if c.InboxPrefix != "" {
		// A frontend may subscribe only to its own inbox (docs/protocol.md).
		if strings.ContainsAny(c.InboxPrefix, "*> \t") || strings.HasPrefix(c.InboxPrefix, ".") || strings.HasSuffix(c.InboxPrefix, ".") {
			return nil, fmt.Errorf("inbox prefix %q: must be a subject without wildcards or spaces, not starting or ending with '.'", c.InboxPrefix)
		}
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	switch {
	case c.Password != "" && c.PasswordFile != "":
		return nil, errors.New("nats: a password and a password file are both set; give one")
	case c.Token != "" && c.TokenFile != "":
		return nil, errors.New("nats: a token and a token file are both set; give one")
	}
	if c.PasswordFile != "" || c.TokenFile != "" {
		// nats.go sends a URL's user and password, or its token, in
		// place of the handlers' (the file never read again: a rotation
		// that does nothing), and refuses a URL's token with a token
		// handler at every connect ("token and token handler both set").
		for _, p := range strings.Split(c.URL, ",") {
			p = strings.TrimSpace(p)
			if !strings.Contains(p, "://") {
				p = "nats://" + p // as nats.go reads it
			}
			if u, err := url.Parse(p); err == nil && u.User != nil {
				return nil, errors.New("nats: a URL holds a user name or token, and a password or token file is set: the URL's would be sent, never the file's; take the credentials out of the URL")
			}
		}
	}
	switch {
	case c.PasswordFile != "":
		// Read again at every connect and reconnect (nats.go asks as it
		// writes each CONNECT): an operator rotating it writes the new one
		// to the file before the server takes it, and the reconnect the
		// server's change causes uses it.
		pw, err := secretfile.Open(c.PasswordFile, "nats password", logger)
		if err != nil {
			return nil, fmt.Errorf("nats: NATSConfig.PasswordFile: %w", err)
		}
		user := c.User
		opts = append(opts, nats.UserInfoHandler(func() (string, string) { return user, pw.Value() }))
	case c.User != "" || c.Password != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	switch {
	case c.TokenFile != "":
		tok, err := secretfile.Open(c.TokenFile, "nats token", logger)
		if err != nil {
			return nil, fmt.Errorf("nats: NATSConfig.TokenFile: %w", err)
		}
		opts = append(opts, nats.TokenHandler(tok.Value))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", c.NKey, err)
		}
		opts = append(opts, opt)
	}
	if c.CA != "" {
		opts = append(opts, nats.RootCAs(c.CA))
	}
	if c.Cert != "" || c.Key != "" {
		opts = append(opts, nats.ClientCert(c.Cert, c.Key))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, &NATSConnectError{URL: RedactURL(c.URL), Err: err}
	}
	return nc, nil
}

// MsgNATSRefused is logged at each reconnect the server refuses for
// memoryd's credentials (a password, token, NKey or .creds file it no
// longer takes); a process's log handler may hold back its repeats (a
// rotation walk: 39 lines in 10 s).
const MsgNATSRefused = "nats server refuses memoryd's credentials; reconnecting until it takes them"

// MsgNATSTLSRefused is logged at each reconnect whose TLS handshake fails
// (the server refusing memoryd's client certificate, expired or of another
// CA); a process's log handler may hold back its repeats. A reconnect
// whose handshake fails here (memoryd not trusting the server's
// certificate) reaches no handler in nats.go: /readyz names it
// (notConnected).
const MsgNATSTLSRefused = "nats server and memoryd do not agree on TLS (a certificate refused, expired or not trusted); reconnecting until they do"

// tlsRefused reports whether err is the server refusing the TLS
// handshake ("remote error: tls: bad certificate": crypto/tls gives an
// alert as a *net.OpError of Op "remote error" around an unexported type).
// A handshake failing here, memoryd not trusting the server, reaches no
// handler (notConnected says it).
func tlsRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// refusedCredentials reports whether err is the server refusing the
// connection's credentials.
func refusedCredentials(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// NATSConnectError is a failure to connect to NATS.
type NATSConnectError struct {
	// URL is the server URL(s), passwords redacted.
	URL string
	Err error
}

func (e *NATSConnectError) Error() string {
	return fmt.Sprintf("cannot connect to NATS at %s: %v", e.URL, e.Err)
}
func (e *NATSConnectError) Unwrap() error { return e.Err }

// RedactURL hides passwords in a (comma-separated list of) URL(s) or a
// keyword/value connection string (Postgres's "host=h password=p"). A
// part that does not parse as a URL with an authority (a password holding
// '/' or a bad %-escape, a URL without its scheme) but holds an '@' has
// all before it masked: such a part is shown in the very errors that say
// it is not a URL. The value of a secret-named parameter (a URL's
// ?password= or ?api_key=, a keyword's password=) is masked too, and a
// NATS URL's user without a password, which nats.go sends as the token.
//
// A list is split only before a part with a scheme: a comma may be in a
// URL's password (pgx accepts "postgres://u:a,b@h/db") or be its hosts'
// separator. A keyword/value string is read as libpq reads it: a value
// ends at unquoted whitespace, so a password may hold ',', ';' or '&',
// a quoted one spaces, and either a backslash-escaped character.
func RedactURL(u string) string {
	if !hasScheme.MatchString(u) {
		if strings.Contains(u, "@") && !strings.Contains(u, "=") {
			parts := strings.Split(u, ",")
			for i, p := range parts {
				if j := strings.LastIndex(p, "@"); j >= 0 {
					parts[i] = "xxxxx" + p[j:]
				}
			}
			return strings.Join(parts, ",")
		}
		return secretKeyword.ReplaceAllString(u, "${1}${2}${3}xxxxx")
	}
	var parts []string
	from := 0
	for _, loc := range nextURL.FindAllStringIndex(u, -1) {
		parts = append(parts, u[from:loc[0]])
		from = loc[0] + 1 // after the comma
	}
	parts = append(parts, u[from:])
	for i, p := range parts {
		pu, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err == nil && pu.Opaque == "":
			if pu.User != nil && natsSchemes[strings.ToLower(pu.Scheme)] {
				if _, ok := pu.User.Password(); !ok && pu.User.Username() != "" {
					pu.User = url.User("xxxxx") // nats.go's token
				}
			}
			parts[i] = pu.Redacted()
		case strings.Contains(p, "@"):
			pre, rest := "", p
			if j := strings.Index(p, "://"); j >= 0 {
				pre, rest = p[:j+3], p[j+3:]
			}
			parts[i] = pre + "xxxxx" + rest[strings.LastIndex(rest, "@"):]
		}
		parts[i] = secretParam.ReplaceAllString(parts[i], "${1}${2}${3}xxxxx")
	}
	return strings.Join(parts, ",")
}

var (
	// hasScheme matches a string that starts as a URL does.
	hasScheme = regexp.MustCompile(`^\s*[A-Za-z][A-Za-z0-9+.-]*://`)
	// nextURL matches the comma before the next URL of a list.
	nextURL = regexp.MustCompile(`,\s*[A-Za-z][A-Za-z0-9+.-]*://`)
	// natsSchemes are nats.go's URL schemes.
	natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}
)

// secretNames are the parameters whose value is a secret.
const secretNames = `(?:ssl)?password|passwd|pwd|api[_-]?key|key|token|access[_-]?token|auth[_-]?token|secret|client[_-]?secret|sig|signature`

// secretParam matches a secret parameter of a URL's query; secretKeyword
// one of a keyword/value string, its value quoted as libpq quotes it (an
// unterminated quote runs to the end), or not.
var (
	secretParam   = regexp.MustCompile(`(?i)(^|[\s?&;])(` + secretNames + `)(\s*=\s*)([^\s&;#]*)`)
	secretKeyword = regexp.MustCompile(`(?i)(^|[\s;&])(` + secretNames + `)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|[^\s\\])*\\?)`)
)
