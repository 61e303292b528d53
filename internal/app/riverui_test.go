package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/store/storetest"
)

// uiTestArgs is a job on a queue no worker serves: it stays available for
// the UI to list, cancel or not.
type uiTestArgs struct {
	Note string `json:"note"`
}

func (uiTestArgs) Kind() string { return "riverui_test" }

// insertUITestJob inserts one uiTestArgs job through an insert-only River
// client on pool and returns its id.
func insertUITestJob(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(context.Background(), uiTestArgs{Note: "shown in the ui"}, &river.InsertOpts{Queue: "riverui_test"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// uiClient sends requests to a mounted UI and reads the answers.
type uiClient struct {
	t    *testing.T
	base string // the UI's URL, ending in its path
	http *http.Client
}

// do sends method to path (under the UI) with body, after auth sets the
// credentials, and returns the status and body.
func (c uiClient) do(method, path, body string, auth func(*http.Request)) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != nil {
		auth(req)
	}
	hc := c.http
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// jobState asks the UI's API for a job and returns its state.
func (c uiClient) jobState(id int64, auth func(*http.Request)) string {
	c.t.Helper()
	code, body := c.do("GET", fmt.Sprintf("api/jobs/%d", id), "", auth)
	if code != http.StatusOK {
		c.t.Fatalf("GET api/jobs/%d = %d %s", id, code, body)
	}
	var job struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &job); err != nil || job.ID != id {
		c.t.Fatalf("GET api/jobs/%d = %s (%v)", id, body, err)
	}
	return job.State
}

func basicAuth(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// TestRiverUIOnOpsEndpoint: a running app with River's UI enabled serves
// it under /riverui/ on --http, only with its credentials (basic auth, the
// bearer token, or the cookie a ?token= visit sets); the job list API
// returns a job the test inserted; and, mutations not being enabled, a
// cancel is refused with 403 and leaves the job as it was, while GETs work.
func TestRiverUIOnOpsEndpoint(t *testing.T) {
	t.Parallel()
	svc := startTestApp(t, func(c *Config) {
		c.Ops = OpsConfig{Addr: "127.0.0.1:0"}
		c.RiverUI = RiverUIConfig{Enabled: true, User: "ops", Password: "s3cret pass", Token: "tok-123"}
	})
	id := insertUITestJob(t, svc.store.Pool())
	ui := uiClient{t: t, base: "http://" + svc.OpsAddr() + "/riverui/"}
	good := basicAuth("ops", "s3cret pass")

	for _, c := range []struct {
		name string
		auth func(*http.Request)
	}{
		{"no credentials", nil},
		{"wrong password", basicAuth("ops", "s3cret")},
		{"wrong user", basicAuth("root", "s3cret pass")},
		{"wrong token", bearer("tok-12")},
		{"token as basic auth password", basicAuth("ops", "tok-123")},
	} {
		for _, path := range []string{"", "api/jobs?state=available"} {
			if code, _ := ui.do("GET", path, "", c.auth); code != http.StatusUnauthorized {
				t.Errorf("%s: GET /riverui/%s = %d, want 401", c.name, path, code)
			}
		}
	}
	if code, _ := ui.do("POST", "api/jobs/cancel", fmt.Sprintf(`{"ids":["%d"]}`, id), nil); code != http.StatusUnauthorized {
		t.Errorf("POST without credentials = %d, want 401", code)
	}

	code, body := ui.do("GET", "", "", good)
	if code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET /riverui/ with basic auth = %d %.200s", code, body)
	}
	code, body = ui.do("GET", "api/jobs?state=available&limit=100", "", bearer("tok-123"))
	if code != http.StatusOK {
		t.Fatalf("GET api/jobs with the token = %d %s", code, body)
	}
	var list struct {
		Data []struct {
			ID    int64  `json:"id"`
			Kind  string `json:"kind"`
			Queue string `json:"queue"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("job list %s: %v", body, err)
	}
	found := false
	for _, j := range list.Data {
		found = found || j.ID == id && j.Kind == "riverui_test" && j.Queue == "riverui_test"
	}
	if !found {
		t.Fatalf("job list lacks job %d of kind riverui_test: %s", id, body)
	}

	// Read-only: every change refused, the job untouched.
	for _, m := range []struct{ method, path, body string }{
		{"POST", "api/jobs/cancel", fmt.Sprintf(`{"ids":["%d"]}`, id)},
		{"POST", "api/jobs/delete", fmt.Sprintf(`{"ids":["%d"]}`, id)},
		{"POST", "api/jobs/retry", fmt.Sprintf(`{"ids":["%d"]}`, id)},
		{"PUT", "api/queues/extract/pause", "{}"},
		{"PATCH", "api/queues/extract", "{}"},
	} {
		if code, body := ui.do(m.method, m.path, m.body, good); code != http.StatusForbidden || !strings.Contains(body, "--riverui-mutations") {
			t.Errorf("%s %s = %d %s, want 403 naming --riverui-mutations", m.method, m.path, code, body)
		}
	}
	if st := ui.jobState(id, good); st != "available" {
		t.Fatalf("job %d after refused changes is %s, want available", id, st)
	}
	if code, body := ui.do("GET", "api/queues/extract", "", good); code != http.StatusOK || !strings.Contains(body, `"paused_at":null`) {
		t.Fatalf("queue after a refused pause = %d %s", code, body)
	}

	// A browser: ?token= once, then the cookie, and the token leaves the
	// address.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := uiClient{t: t, base: ui.base, http: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.Contains(req.URL.RawQuery, "token") {
			return errors.New("redirected with the token still in the address")
		}
		return nil
	}}}
	if code, _ := browser.do("GET", "?token=wrong", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET ?token=wrong = %d, want 401", code)
	}
	// With the challenge RFC 9110 requires of a 401, as every other 401
	// of the UI (before, none).
	resp, err := http.Get(ui.base + "?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(got, `Basic realm="memoryd River UI"`) {
		t.Errorf("GET ?token=wrong: %s, WWW-Authenticate %q; want 401 with basic auth's challenge", resp.Status, got)
	}
	if code, body := browser.do("GET", "?token=tok-123", "", nil); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET ?token= = %d %.200s", code, body)
	}
	if st := browser.jobState(id, nil); st != "available" {
		t.Fatalf("job %d read with the cookie is %s", id, st)
	}
}

// TestRiverUIMutations: with AllowMutations the UI's cancel works, except
// from a page of another site; without it the same request is refused.
func TestRiverUIMutations(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	for _, allow := range []bool{false, true} {
		cfg := RiverUIConfig{Enabled: true, Token: "tok", AllowMutations: allow}.withDefaults()
		u, err := startRiverUI(context.Background(), cfg, s.Pool(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(u.stop)
		mux := http.NewServeMux()
		mux.Handle(cfg.Path, u)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		ui := uiClient{t: t, base: srv.URL + cfg.Path}
		auth := bearer("tok")
		id := insertUITestJob(t, s.Pool())
		cancel := fmt.Sprintf(`{"ids":["%d"]}`, id)

		if !allow {
			// A token-only UI's 401s challenge for the token, saying
			// invalid_token only to a request that sent one.
			for _, c := range []struct {
				name string
				auth func(*http.Request)
				want string
			}{
				{"no credentials", nil, `Bearer realm="memoryd River UI"`},
				{"wrong token", bearer("tok-wrong"), `Bearer realm="memoryd River UI", error="invalid_token"`},
			} {
				req, err := http.NewRequest("GET", ui.base, nil)
				if err != nil {
					t.Fatal(err)
				}
				if c.auth != nil {
					c.auth(req)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != c.want {
					t.Errorf("%s: %s, WWW-Authenticate %q; want 401 with %q", c.name, resp.Status, got, c.want)
				}
			}
			if code, _ := ui.do("POST", "api/jobs/cancel", cancel, auth); code != http.StatusForbidden {
				t.Fatalf("cancel without AllowMutations = %d, want 403", code)
			}
			if st := ui.jobState(id, auth); st != "available" {
				t.Fatalf("job after a refused cancel is %s", st)
			}
			continue
		}
		crossSite := func(r *http.Request) { auth(r); r.Header.Set("Origin", "https://evil.example") }
		if code, _ := ui.do("POST", "api/jobs/cancel", cancel, crossSite); code != http.StatusForbidden {
			t.Fatalf("cross-site cancel = %d, want 403", code)
		}
		if st := ui.jobState(id, auth); st != "available" {
			t.Fatalf("job after a cross-site cancel is %s", st)
		}
		if code, body := ui.do("POST", "api/jobs/cancel", cancel, auth); code != http.StatusOK {
			t.Fatalf("cancel with AllowMutations = %d %s", code, body)
		}
		if st := ui.jobState(id, auth); st != "cancelled" {
			t.Fatalf("job after cancel is %s, want cancelled", st)
		}
	}
}

// TestRiverUIConfig: an enabled UI with a token, with basic auth, or on a
// path of its own is accepted, the path given its trailing slash (the
// refused configurations are rows of TestValidateNamesTheField).
func TestRiverUIConfig(t *testing.T) {
	t.Parallel()
	for _, ui := range []RiverUIConfig{
		{},
		{Enabled: true, Token: "t"},
		{Enabled: true, User: "u", Password: "p"},
		{Enabled: true, Token: "t", Path: "/jobs"},
	} {
		cfg := Defaults()
		cfg.Ops.Addr, cfg.RiverUI = ":9090", ui
		a, err := New(cfg)
		if err != nil {
			t.Errorf("New with %+v = %v", ui, err)
			continue
		}
		if p := a.Config().RiverUI.Path; p != "/riverui/" && p != "/jobs/" {
			t.Errorf("New with %+v: path %q", ui, p)
		}
	}
}
