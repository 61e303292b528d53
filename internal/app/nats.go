package app

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
)

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
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// Every request or turn the server refuses is told, not only the
		// last of those at once (the proxy's publishes, many users').
		events.TrackViolations(),
	}
	if c.InboxPrefix != "" {
		// A frontend may subscribe only to its own inbox (docs/protocol.md).
		if strings.ContainsAny(c.InboxPrefix, "*> \t") || strings.HasPrefix(c.InboxPrefix, ".") || strings.HasSuffix(c.InboxPrefix, ".") {
			return nil, fmt.Errorf("inbox prefix %q: must be a subject without wildcards or spaces, not starting or ending with '.'", c.InboxPrefix)
		}
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.User != "" || c.Password != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file: %w", err)
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
// ?password= or ?api_key=, a keyword's password=) is masked too.
func RedactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if !strings.Contains(p, "://") && !strings.Contains(p, "@") {
			parts[i] = redactParams(p) // a keyword/value string, or no URL
			continue
		}
		pu, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err == nil && pu.Opaque == "":
			parts[i] = pu.Redacted()
		case strings.Contains(p, "@"):
			pre, rest := "", p
			if j := strings.Index(p, "://"); j >= 0 {
				pre, rest = p[:j+3], p[j+3:]
			}
			parts[i] = pre + "xxxxx" + rest[strings.LastIndex(rest, "@"):]
		}
		parts[i] = redactParams(parts[i])
	}
	return strings.Join(parts, ",")
}

// secretParam matches a parameter whose value is a secret, in a URL's
// query or a keyword/value string (quoted as libpq quotes it, or not).
var secretParam = regexp.MustCompile(`(?i)(^|[\s?&;])((?:ssl)?password|passwd|pwd|api[_-]?key|key|token|access[_-]?token|auth[_-]?token|secret|client[_-]?secret|sig|signature)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&;]*)`)

func redactParams(s string) string {
	return secretParam.ReplaceAllString(s, "${1}${2}${3}xxxxx")
}
