package worker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestRetryAfterSnoozesTheJob: a 429 with Retry-After ends the attempt after
// one request; River's row shows the job scheduled for the server's delay,
// with no attempt spent and no error recorded, the snooze counted and its
// reason in the metadata, and the turn still pending.
func TestRetryAfterSnoozesTheJob(t *testing.T) {
	e := setup(t)
	const retryAfter = 60 * time.Second // past River's scheduler interval, so the row is "scheduled"
	srv := extractortest.NewServer(t, extractortest.Reply{Status: http.StatusTooManyRequests,
		Body: `{"error":{"message":"slow down"}}`, Header: http.Header{"Retry-After": {"60"}}})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	e.start(llm, nil)
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})

	var job *rivertype.JobRow
	e.waitFor("the job snoozed", func() (bool, string) {
		jobs := e.extractJobs()
		if len(jobs) != 1 {
			return false, fmt.Sprintf("%d jobs", len(jobs))
		}
		job = jobs[0]
		var meta struct {
			Waits int `json:"memoryd_rate_limit_waits"`
		}
		_ = json.Unmarshal(job.Metadata, &meta)
		return job.State == rivertype.JobStateScheduled && meta.Waits == 1, fmt.Sprintf("state %s, metadata %s", job.State, job.Metadata)
	})
	after := time.Now()
	if job.ScheduledAt.Before(before.Add(retryAfter)) || job.ScheduledAt.After(after.Add(retryAfter*5/4)) {
		t.Errorf("scheduled at %s, want between %s and %s (now + Retry-After, spread by at most 25%%)",
			job.ScheduledAt, before.Add(retryAfter), after.Add(retryAfter*5/4))
	}
	if job.Attempt != 0 || len(job.Errors) != 0 {
		t.Errorf("attempt %d, errors %+v; want no attempt spent and no error recorded", job.Attempt, job.Errors)
	}
	var meta map[string]any
	if err := json.Unmarshal(job.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if reason, _ := meta["memoryd_snooze_reason"].(string); !strings.Contains(reason, "status 429") {
		t.Errorf("metadata %s does not say why the job was snoozed", job.Metadata)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("model requests = %d, want 1: nothing retries within the attempt", got)
	}
	turn, err := e.store.GetTurn(e.ctx, "alice", "t1")
	if err != nil || turn.Status != store.StatusPending {
		t.Errorf("turn = %+v, %v; want it pending", turn, err)
	}
}

// TestJobTimeoutMustFitAnExtractorCall: a job timeout that one LLM call
// (two requests of its timeout) could outlast is refused, naming the field.
func TestJobTimeoutMustFitAnExtractorCall(t *testing.T) {
	e := setup(t)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "fake", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		jobTimeout time.Duration
		ok         bool
	}{{time.Minute, false}, {59 * time.Second, false}, {61 * time.Second, true}} {
		_, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: llm, JobTimeout: tt.jobTimeout})
		if tt.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "Config.JobTimeout")) {
			t.Errorf("JobTimeout %s: New error = %v, want ok %v (or an error naming Config.JobTimeout)", tt.jobTimeout, err, tt.ok)
		}
	}
}

// modelDownFor is an LLM whose server answers its first down requests
// with failure, and then a fact of the name Alice.
func modelDownFor(t *testing.T, down int, failure extractortest.Reply) *extractor.LLM {
	t.Helper()
	return modelDownWith(t, 0, down, failure)
}

// modelDownWith is modelDownFor with the LLM's MaxProbeGap: negative sends
// every request, for a test that counts a long outage in requests (with
// probes, 30 failed requests take over a minute; the probing is the
// extractor's own test, TestDownServerIsProbedNotAskedByEveryJob).
func modelDownWith(t *testing.T, probeGap time.Duration, down int, failure extractortest.Reply) *extractor.LLM {
	t.Helper()
	return aliceModelWith(t, probeGap, func(n int) *extractortest.Reply {
		if n <= down {
			return &failure
		}
		return nil
	})
}

// aliceModel is an LLM whose server calls before with each request's
// number (from 1) and answers what it returns, or, when that is nil, a
// fact of the name Alice.
func aliceModel(t *testing.T, before func(n int) *extractortest.Reply) *extractor.LLM {
	t.Helper()
	return aliceModelWith(t, 0, before)
}

// aliceModelWith is aliceModel with the LLM's MaxProbeGap (0: its default).
func aliceModelWith(t *testing.T, probeGap time.Duration, before func(n int) *extractortest.Reply) *extractor.LLM {
	t.Helper()
	srv := extractortest.NewServer(t)
	var mu sync.Mutex
	served := 0
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		mu.Lock()
		defer mu.Unlock()
		served++
		if r := before(served); r != nil {
			return *r
		}
		return extractortest.Content(`{"facts":[{"op":"set","key":"name","value":"Alice"}],"context":[]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", MaxProbeGap: probeGap})
	if err != nil {
		t.Fatal(err)
	}
	return llm
}

// TestUnreachableModelWaits: while the model server answers 503 (restarting,
// loading a model), a job is snoozed without spending attempts, so a turn
// with a single attempt is extracted once the model is back instead of
// failing at its first 503; the waits are counted in the job's metadata.
func TestUnreachableModelWaits(t *testing.T) {
	e := setup(t)
	const down = 3 // requests answered 503
	llm := modelDownFor(t, down, extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":"loading model"}`})
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})

	st := e.waitDone(1)
	if st.TurnsProcessed != 1 {
		turn, _ := e.store.GetTurn(e.ctx, "alice", "t1")
		t.Fatalf("turn %+v, want it processed once the model is back", turn)
	}
	if waits := e.onlyJobWaits(t, "memoryd_model_waits"); waits != down {
		t.Errorf("%d model waits, want %d", waits, down)
	}
}

// onlyJobWaits is the free waits counted under key in the metadata of the
// one extraction job; the test fails when there is not one job, or it
// recorded an error (a wait spends no attempt and records none).
func (e *env) onlyJobWaits(t *testing.T, key string) int {
	t.Helper()
	jobs := e.extractJobs()
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}
	var meta map[string]any
	_ = json.Unmarshal(jobs[0].Metadata, &meta)
	if len(jobs[0].Errors) != 0 {
		t.Errorf("job metadata %s, errors %+v; want no error recorded", jobs[0].Metadata, jobs[0].Errors)
	}
	n, _ := meta[key].(float64)
	return int(n)
}

// TestModelAnswering500sWaits: a model server answering 500 to every
// request (one restarting behind a gateway) fails no turn: from the third
// 500 in a row the jobs wait for it as for a 503. Before, each turn spent
// its 5 attempts in about 30 s and failed (a lifecycle probe: 96 turns of
// a 60-second outage). Here 6 turns with 3 attempts each meet 30 500s.
func TestModelAnswering500sWaits(t *testing.T) {
	e := setup(t)
	const down = 30 // requests answered 500
	llm := modelDownWith(t, -1, down, extractortest.Error(http.StatusInternalServerError, "model runner restarting"))
	// The turns are in the stream before the worker starts: published
	// while it ran, a loaded machine could leave the first one alone long
	// enough for its three attempts to be one request's 500s in a row,
	// that turn's own failure (seen: -cpu 1, 1 turn failed).
	for i := range 6 {
		e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: fmt.Sprintf("user%d", i), UserMessage: fmt.Sprintf("My name is Alice and I have %d cats.", i)})
	}
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 3 })
	if st := e.waitDone(6); st.TurnsProcessed != 6 {
		t.Fatalf("stats %+v after a model outage of %d 500s, want 6 turns processed and none failed", st, down)
	}
}

// TestModelRefusingTheKeyWaits: a model server refusing memoryd's key (a
// key rotated) or not serving its model (not pulled yet) fails no turn
// while an operator fixes it: the jobs wait as for an outage, logged as
// the configuration's refusal, and the turns are processed once it
// answers. Before, each turn failed at its first request, for good, until
// retry-failed (an LLM walk: 30 turns, 30 ERROR lines, 30 failed).
func TestModelRefusingTheKeyWaits(t *testing.T) {
	for _, refusal := range []extractortest.Reply{
		extractortest.Error(http.StatusUnauthorized, "Incorrect API key provided"),
		{Status: http.StatusNotFound, Body: `{"error":"model \"llama3.1\" not found, try pulling it first"}`},
	} {
		t.Run(http.StatusText(refusal.Status), func(t *testing.T) {
			e := setup(t)
			const turns, down = 3, 8
			llm := modelDownFor(t, down, refusal)
			var logs lockedBuffer
			obs := &outcomes{n: map[string]int{}}
			e.start(llm, func(c *worker.Config) {
				c.MaxAttempts = 2
				c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
				c.Observer = obs
			})
			for i := range turns {
				e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: fmt.Sprintf("user%d", i), UserMessage: "My name is Alice."})
			}
			if st := e.waitDone(turns); st.TurnsProcessed != turns {
				t.Fatalf("stats %+v after %d refusals, want %d turns processed and none failed", st, down, turns)
			}
			// Counted as the refusal it is, not as a server down
			// (memoryd_turns_extracted_total); before, model_unreachable.
			if obs.get("model_refused") == 0 || obs.get("model_unreachable") != 0 {
				t.Errorf("outcomes %s; want the waits counted as model_refused, none as model_unreachable", obs)
			}
			// And woken alike when the server answers (wakeWaiters looks
			// for jobs snoozed for model_unreachable).
			for _, j := range e.extractJobs() {
				var meta map[string]any
				_ = json.Unmarshal(j.Metadata, &meta)
				if meta["memoryd_model_waits"] != nil && meta["memoryd_snoozed_for"] != "model_unreachable" {
					t.Errorf("job %d waited for the refusal, snoozed for %v; want model_unreachable, which a wake ends", j.ID, meta["memoryd_snoozed_for"])
				}
			}
			if !strings.Contains(logs.String(), "model server refuses memoryd's API key or model") || strings.Contains(logs.String(), `"extraction failed"`) {
				t.Errorf("log does not say the server refuses the configuration, or says a turn failed:\n%s", logs.String())
			}
		})
	}
}

// TestModelOutageLogsOnceAJob: while the model server is down every job
// waits again and again (every turn is a job with a model); only a job's
// first wait is logged at info level or above (a warning, which the
// process's handler holds back to one every 30 s: OutageRepeats), the
// later ones at debug. Before, each later wait was an info line: an
// operator's outage of 500s for a minute at 3 turns a second logged 532
// of them beside 178 warnings.
func TestModelOutageLogsOnceAJob(t *testing.T) {
	e := setup(t)
	const turns, down = 4, 20 // more 503s than jobs: some job waits twice
	llm := modelDownWith(t, -1, down, extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":"loading model"}`})
	var logs lockedBuffer
	e.start(llm, func(c *worker.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	for i := range turns {
		e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: fmt.Sprintf("user%d", i), UserMessage: "My name is Alice."})
	}
	if st := e.waitDone(turns); st.TurnsProcessed != turns {
		t.Fatalf("stats %+v, want %d turns processed once the model is back", st, turns)
	}
	waits := 0
	for _, j := range e.extractJobs() {
		var meta struct {
			Waits int `json:"memoryd_model_waits"`
		}
		_ = json.Unmarshal(j.Metadata, &meta)
		waits += meta.Waits
	}
	levels := map[string]int{}
	for l := range strings.Lines(logs.String()) {
		var line struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, "model server unreachable") {
			levels[line.Level]++
		}
	}
	if waits <= turns {
		t.Fatalf("%d model waits for %d jobs, want some job to wait more than once", waits, turns)
	}
	if levels["INFO"] != 0 || levels["WARN"] == 0 || levels["WARN"] > turns || !slices.Contains(worker.OutageRepeats, "model server unreachable; extraction waiting for it without spending attempts") {
		t.Fatalf("%d waits logged at %v, held back by the handler: %v; want a warning at each job's first wait, held back, and none at info", waits, levels, worker.OutageRepeats)
	}
}

// TestTurnAnswered500AloneFails: one turn whose request the server always
// answers 500, on a quiet system, spends its attempts and fails (listed by
// `memoryd failed`), rather than wait out --llm-max-outage as an outage: a
// review found it pending, "model server unreachable", for 30 minutes.
func TestTurnAnswered500AloneFails(t *testing.T) {
	e := setup(t)
	llm := modelDownFor(t, 1<<30, extractortest.Error(http.StatusInternalServerError, "template error for this input"))
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 4 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	if st := e.waitDone(1); st.TurnsFailed != 1 {
		t.Fatalf("stats %+v, want the turn failed after its attempts", st)
	}
}

// TestFailureLogNamesTheTurns: the "extraction failed" line says whose
// turns failed (user_id, event_ids), as the docs' log keys promise.
func TestFailureLogNamesTheTurns(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t, extractortest.Error(http.StatusBadRequest, "bad request"))
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	e.start(llm, func(c *worker.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	e.waitDone(1)

	var line struct {
		Msg      string   `json:"msg"`
		UserID   string   `json:"user_id"`
		EventIDs []string `json:"event_ids"`
	}
	// Logged after the turn is marked failed (which waitDone saw): before,
	// the logs were read at once and a CI run found only River's lines.
	e.waitFor("the failure logged", func() (bool, string) {
		for _, l := range strings.Split(logs.String(), "\n") {
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "extraction failed" {
				return true, ""
			}
		}
		return false, "no \"extraction failed\" line"
	})
	if line.Msg != "extraction failed" || line.UserID != "alice" || len(line.EventIDs) != 1 || line.EventIDs[0] != "t1" {
		t.Errorf("failure log %+v, want user_id alice and event_ids [t1]", line)
	}
}

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestModelRefusingIsReported: while the model server refuses memoryd's
// key, Worker.ModelRefusing (which /readyz reads) says since when and why;
// once its errors are no longer refusals (the key fixed, the server
// restarting: 503) the key is no longer blamed, and the first answer
// after ends the outage. Before, nothing but the log showed it: a
// rotation walk revoked the key and /readyz said 200 throughout; then
// /readyz blamed the key until the server answered.
func TestModelRefusingIsReported(t *testing.T) {
	e := setup(t)
	const (
		refusing = iota
		down
		up
	)
	var state atomic.Int32
	llm := aliceModel(t, func(int) *extractortest.Reply {
		switch state.Load() {
		case refusing:
			r := extractortest.Error(http.StatusUnauthorized, "Incorrect API key provided")
			return &r
		case down:
			r := extractortest.Error(http.StatusServiceUnavailable, "loading model")
			return &r
		}
		return nil
	})
	w, _ := e.startWorker(llm, nil)
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	e.waitFor("the refusal reported", func() (bool, string) {
		r := w.ModelRefusing()
		return r != nil && !r.Since.IsZero() && strings.Contains(r.Err, "401"), fmt.Sprintf("%+v", r)
	})
	state.Store(down)
	e.waitFor("the refusal no longer reported while the server is down", func() (bool, string) {
		return w.ModelRefusing() == nil, fmt.Sprintf("%+v", w.ModelRefusing())
	})
	if st, err := e.store.Stats(e.ctx, ""); err != nil || st.TurnsProcessed != 0 {
		t.Fatalf("stats %+v (%v), want the turn unprocessed while the server is down", st, err)
	}
	state.Store(up)
	if st := e.waitDone(1); st.TurnsProcessed != 1 {
		t.Fatalf("stats %+v, want the turn processed once the key is taken", st)
	}
	if r := w.ModelRefusing(); r != nil {
		t.Fatalf("ModelRefusing after the model answered = %+v, want nil", r)
	}
}

// TestModelRefusingPastTheOutageSaysSo: an attempt spent past
// --llm-max-outage on a server that refuses memoryd's model (Ollama's 404
// for a model not pulled) is logged as the refusal it is, naming the
// flags to fix, not as the server unreachable: a local-model walk with a
// wrong --llm-model saw "model server unreachable past --llm-max-outage"
// from a server that answered every request at once. The line is held
// back with the other outage lines.
func TestModelRefusingPastTheOutageSaysSo(t *testing.T) {
	e := setup(t)
	refusal := extractortest.Reply{Status: http.StatusNotFound, Body: `{"error":"model \"qwen3\" not found, try pulling it first"}`}
	llm := modelDownFor(t, 1<<30, refusal)
	var logs lockedBuffer
	e.start(llm, func(c *worker.Config) {
		c.JobRetryBase = 10 * time.Millisecond
		c.MaxModelOutage = 20 * time.Millisecond
		c.MaxAttempts = 2
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	const want = "model server refuses memoryd's API key or model past --llm-max-outage (--llm-api-key or --llm-api-key-file, --llm-model, --llm-base-url); extraction failed, spending attempts"
	e.waitFor("an attempt spent past the outage logged", func() (bool, string) {
		return strings.Contains(logs.String(), `"attempt":1`), logs.String()
	})
	if !strings.Contains(logs.String(), `"msg":"`+want+`"`) || strings.Contains(logs.String(), "unreachable past --llm-max-outage") {
		t.Errorf("the attempt spent on a refused model is not logged as the refusal:\n%s", logs.String())
	}
	if !slices.Contains(worker.OutageRepeats, want) {
		t.Error("the line is not among worker.OutageRepeats")
	}
}
