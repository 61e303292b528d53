package app

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/memoryd/memoryd/internal/authchallenge"
)

// RiverUIConfig mounts River's UI (riverqueue.com/riverui: jobs, queues,
// their states and errors) on the operators' endpoint. It is off unless
// Enabled; enabled, it needs Ops.Addr and credentials: User and Password
// (HTTP basic auth), Token (a bearer token), or both.
type RiverUIConfig struct {
	// Enabled serves the UI under Path. Default false.
	Enabled bool
	// Path is where the UI is served, with a trailing slash. Default
	// "/riverui/".
	Path string
	// User and Password are HTTP basic auth credentials, both or neither.
	User, Password string
	// Token is accepted as "Authorization: Bearer <Token>"; a browser,
	// which cannot send that header, may open Path?token=<Token> once: the
	// UI then sets it in a cookie (HttpOnly, SameSite=Strict) and drops it
	// from the address.
	Token string
	// AllowMutations lets the UI change River's state: retry, cancel and
	// delete jobs, pause, resume and change queues. Default false: every
	// request but GET and HEAD is refused with 403, since riverui has no
	// read-only switch of its own.
	AllowMutations bool
}

// riverUIDefaultPath is RiverUIConfig.Path's default.
const riverUIDefaultPath = "/riverui/"

// riverUITokenCookie holds the token a browser opened the UI with.
const riverUITokenCookie = "memoryd_riverui_token"

func (c RiverUIConfig) withDefaults() RiverUIConfig {
	if c.Path == "" {
		c.Path = riverUIDefaultPath
	}
	if !strings.HasSuffix(c.Path, "/") {
		c.Path += "/"
	}
	return c
}

// validate names the first field of an enabled UI that cannot be served.
func (c RiverUIConfig) validate(opsAddr string) error {
	if !c.Enabled {
		return nil
	}
	switch {
	case opsAddr == "":
		return &ConfigError{Field: "Ops.Addr", Reason: "is required with RiverUI.Enabled (the UI is served on the operators' endpoint)"}
	case c.User == "" && c.Password == "" && c.Token == "":
		return &ConfigError{Field: "RiverUI.Token", Reason: "or RiverUI.User and RiverUI.Password are required with RiverUI.Enabled (the UI is never served without credentials)"}
	case c.User != "" && c.Password == "":
		return &ConfigError{Field: "RiverUI.Password", Reason: "is required with RiverUI.User"}
	case c.User == "" && c.Password != "":
		return &ConfigError{Field: "RiverUI.User", Reason: "is required with RiverUI.Password"}
	case strings.ContainsRune(c.User, ':'):
		return &ConfigError{Field: "RiverUI.User", Reason: "must not contain ':' (basic auth separates user and password with it)"}
	}
	p := c.Path
	if !strings.HasPrefix(p, "/") || p == "/" || strings.ContainsAny(p, "?#{} \t") {
		return &ConfigError{Field: "RiverUI.Path", Value: fmt.Sprintf("%q", p), Reason: "must be an absolute path other than /, like /riverui/"}
	}
	for _, taken := range []string{"/metrics", "/healthz", "/readyz", "/debug/"} {
		if strings.HasPrefix(p, taken) || strings.HasPrefix(taken, p) {
			return &ConfigError{Field: "RiverUI.Path", Value: fmt.Sprintf("%q", p), Reason: "overlaps " + taken + " on the operators' endpoint"}
		}
	}
	return nil
}

// riverUI is River's UI behind its credentials and, unless mutations are
// allowed, a read-only guard.
type riverUI struct {
	cfg     RiverUIConfig
	handler *riverui.Handler
	// cancel stops the handler's background services (riverui's query
	// cache), which run until the context given to Start ends.
	cancel context.CancelFunc
	// userHash and passHash (with basic auth) and tokenHash (with a
	// token) are SHA-256 sums, so that every comparison takes the same
	// time whatever the length or content of what a client sent.
	userHash, passHash, tokenHash [sha256.Size]byte
}

// startRiverUI builds the UI on an insert-only River client over pool (it
// works no jobs: the service's workers do) and starts its background
// services, which run until stop.
func startRiverUI(ctx context.Context, cfg RiverUIConfig, pool *pgxpool.Pool, logger *slog.Logger) (*riverUI, error) {
	logger = logger.With("component", "riverui")
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("riverui: river client: %w", err)
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		// Job args hold user ids: shown on request, not by default.
		JobListHideArgsByDefault: true,
		Logger:                   logger,
		Prefix:                   cfg.Path,
	})
	if err != nil {
		return nil, fmt.Errorf("riverui: %w", err)
	}
	// The services live as long as the endpoint, not as the caller's ctx.
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := h.Start(uctx); err != nil {
		cancel()
		return nil, fmt.Errorf("riverui: start: %w", err)
	}
	u := &riverUI{cfg: cfg, handler: h, cancel: cancel}
	if cfg.User != "" {
		u.userHash, u.passHash = sha256.Sum256([]byte(cfg.User)), sha256.Sum256([]byte(cfg.Password))
	}
	if cfg.Token != "" {
		u.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	logger.Info("river ui mounted", "path", cfg.Path, "basic_auth", cfg.User != "", "token", cfg.Token != "", "mutations", cfg.AllowMutations)
	return u, nil
}

// stop ends the UI's background services.
func (u *riverUI) stop() { u.cancel() }

// ServeHTTP checks the credentials, then, unless mutations are allowed,
// refuses every method but GET and HEAD, then hands the request to riverui.
func (u *riverUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.cfg.Token != "" && r.Method == http.MethodGet && r.URL.Query().Has("token") {
		u.tokenLogin(w, r)
		return
	}
	if !u.authorized(r) {
		u.challenge(w, r)
		http.Error(w, "unauthorized: River's UI needs the credentials set with --riverui-user/--riverui-password or --riverui-token", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !u.cfg.AllowMutations {
			http.Error(w, "forbidden: River's UI is read-only here (start memoryd with --riverui-mutations to retry, cancel or delete jobs and pause queues)", http.StatusForbidden)
			return
		}
		// Browsers send basic auth and cookies with cross-site requests
		// too: a change must come from the UI's own pages.
		if crossSite(r) {
			http.Error(w, "forbidden: cross-site request", http.StatusForbidden)
			return
		}
	}
	u.handler.ServeHTTP(w, r)
}

// challenge sets the WWW-Authenticate header RFC 9110 requires of a 401:
// basic auth's when it is configured (a browser then asks for it), else the
// token's (with error="invalid_token" when r sent a bearer token).
func (u *riverUI) challenge(w http.ResponseWriter, r *http.Request) {
	if u.cfg.User != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="memoryd River UI", charset="UTF-8"`)
	} else {
		w.Header().Set("WWW-Authenticate", authchallenge.Bearer("memoryd River UI", r))
	}
}

// authorized reports whether r carries the basic auth credentials, the
// bearer token or the token cookie.
func (u *riverUI) authorized(r *http.Request) bool {
	if u.cfg.User != "" {
		if user, pass, ok := r.BasicAuth(); ok {
			uh, ph := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
			// Both compared, always: no early exit on a wrong user.
			if subtle.ConstantTimeCompare(uh[:], u.userHash[:])&subtle.ConstantTimeCompare(ph[:], u.passHash[:]) == 1 {
				return true
			}
		}
	}
	if u.cfg.Token == "" {
		return false
	}
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && u.tokenOK(token) {
		return true
	}
	c, err := r.Cookie(riverUITokenCookie)
	return err == nil && u.tokenOK(c.Value)
}

func (u *riverUI) tokenOK(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], u.tokenHash[:]) == 1
}

// tokenLogin answers a browser's GET with ?token=: a right token is set in
// a cookie and the browser sent to the same address without it, so the
// token leaves the address bar and history; a wrong one is a 401.
func (u *riverUI) tokenLogin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("token")
	if !u.tokenOK(token) {
		u.challenge(w, r)
		http.Error(w, "unauthorized: wrong token", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: riverUITokenCookie, Value: token, Path: u.cfg.Path,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	q.Del("token")
	next := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next.String(), http.StatusSeeOther)
}

// crossSite reports whether a browser says r comes from another site:
// Sec-Fetch-Site (sent by current browsers), else an Origin whose host is
// not the one asked. Clients that are not browsers send neither.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	o, err := url.Parse(origin)
	return err != nil || o.Host != r.Host
}
