package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/extractor"
)

func TestSnoozeReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		msg  string
		want int // length of the reason in bytes
	}{
		{"short", "lock timeout", len("lock timeout")},
		{"at the bound", strings.Repeat("a", maxSnoozeReason), maxSnoozeReason},
		{"long", strings.Repeat("a", 10*maxSnoozeReason), maxSnoozeReason},
		{"long multibyte", strings.Repeat("é", maxSnoozeReason), maxSnoozeReason - 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := snoozeReason(errors.New(c.msg))
			if len(got) != c.want || !utf8.ValidString(got) {
				t.Errorf("snoozeReason: %d bytes (valid UTF-8: %v), want %d", len(got), utf8.ValidString(got), c.want)
			}
		})
	}
}

// TestOutcome: every kind of extractor error, bare and wrapped, at a first
// and a last attempt, maps to one River outcome.
func TestOutcome(t *testing.T) {
	t.Parallel()

	var (
		transient = &extractor.Error{Kind: extractor.KindTransient, Reason: "status 500: boom"}
		permanent = &extractor.Error{Kind: extractor.KindPermanent, Reason: "status 401: bad key"}
		invalid   = &extractor.Error{Kind: extractor.KindInvalidOutput, Reason: "no JSON object (after 2 model calls)"}
		deadline  = &extractor.Error{Kind: extractor.KindTransient, Reason: "model request: context deadline exceeded", Err: context.DeadlineExceeded}
		lockWait  = fmt.Errorf("save: %w", &pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"})
		deadlock  = &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
		other     = errors.New("connection refused")
	)
	retryAfter := func(d time.Duration) error {
		return &extractor.Error{Kind: extractor.KindRetryAfter, RetryAfter: d, Reason: "status 429: slow down"}
	}
	queued := &extractor.Error{Kind: extractor.KindRetryAfter, RetryAfter: 3 * time.Second, Local: true, Reason: "all 1 model request slots stayed busy"}
	down := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, Reason: "status 503: loading model"}
	crashed := &extractor.Error{Kind: extractor.KindTransient, Crashed: true, Reason: "connection error: EOF; the server then refused connections"}
	heldBack := func(probeIn time.Duration) error {
		return &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, HeldBack: true, ProbeIn: probeIn, Reason: "not sent, the model server counts as down"}
	}
	refused := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, Misconfigured: true, Reason: "status 401: invalid api key"}
	heldBackRefused := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, Misconfigured: true, HeldBack: true, ProbeIn: 3 * time.Second,
		Reason: "not sent, refused since ..."}
	budget := retryBudget{maxAttempts: 5, maxLockWaits: 3, maxRateLimitWaits: 10, maxQueueWaits: 100, lockWaitBase: 100 * time.Millisecond,
		maxModelOutage: 10 * time.Minute, maxUnsentHolds: maxUnsentHolds, maxDBOutage: maxDBOutage, maxAloneHolds: maxAloneHolds, modelWaitBase: 2 * time.Second,
		spread: func(d time.Duration) time.Duration { return d }}
	const (
		plain  = "error"
		snooze = "snooze"
		cancel = "cancel"
	)
	tests := []struct {
		name        string
		err         error
		attempt     int
		maxAttempts int    // of the job; default 5
		metadata    string // of the job; default {}
		shutdown    bool

		want       string        // plain, snooze or cancel
		wantSnooze time.Duration // for snooze
		wantLabel  string
		wantRecord bool
		wantFinal  bool
		wantCount  string
		wantN      int
		// wantCrashes: the job's new count of crashes (metaModelCrashes).
		wantCrashes int
	}{
		{name: "transient", err: transient, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "transient wrapped", err: fmt.Errorf("turn e1: %w", transient), attempt: 2, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "transient last attempt", err: transient, attempt: 5, want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "transient, job with River's default attempts", err: transient, attempt: 5, maxAttempts: 25,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "deadline of the attempt", err: deadline, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "not an extractor error", err: other, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "not an extractor error, last attempt", err: other, attempt: 5, want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		{name: "permanent", err: permanent, attempt: 1, want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "permanent joined", err: errors.Join(transient, fmt.Errorf("turn e2: %w", permanent)), attempt: 1,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		{name: "invalid output", err: invalid, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "invalid output last attempt", err: fmt.Errorf("batch: %w", invalid), attempt: 5,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		{name: "retry-after", err: retryAfter(30 * time.Second), attempt: 1,
			want: snooze, wantSnooze: 30 * time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 1},
		{name: "retry-after wrapped, counted before", err: fmt.Errorf("turn e1: %w", retryAfter(2*time.Second)), attempt: 3,
			metadata: `{"memoryd_rate_limit_waits": 4, "snoozes": 6}`,
			want:     snooze, wantSnooze: 16 * time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 5},
		{name: "retry-after longer than the job's backoff", err: retryAfter(30 * time.Second), attempt: 3,
			metadata: `{"memoryd_rate_limit_waits": 4, "snoozes": 6}`,
			want:     snooze, wantSnooze: 30 * time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 5},
		{name: "retry-after of 1s, ninth wait: a minute", err: retryAfter(time.Second), attempt: 1,
			metadata: `{"memoryd_rate_limit_waits": 8}`,
			want:     snooze, wantSnooze: time.Minute, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 9},
		{name: "retry-after zero", err: retryAfter(0), attempt: 1,
			want: snooze, wantSnooze: time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 1},
		{name: "retry-after capped", err: retryAfter(time.Hour), attempt: 1,
			want: snooze, wantSnooze: extractor.MaxRetryAfter, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 1},
		{name: "retry-after at the last attempt spends none", err: retryAfter(time.Second), attempt: 5,
			want: snooze, wantSnooze: time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 1},
		{name: "retry-after past its bound", err: retryAfter(time.Second), attempt: 1, metadata: `{"memoryd_rate_limit_waits": 10}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "retry-after past its bound, last attempt", err: retryAfter(time.Second), attempt: 5, metadata: `{"memoryd_rate_limit_waits": 10}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		// Waits for the process's own model slots: a budget of their own,
		// not the server's rate-limit waits (a backlog spent those and
		// failed turns the model never saw).
		{name: "queued", err: queued, attempt: 1, metadata: `{"memoryd_rate_limit_waits": 10}`,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeQueued, wantCount: metaQueueWaits, wantN: 1},
		{name: "queued, counted before", err: fmt.Errorf("turn e1: %w", queued), attempt: 5, metadata: `{"memoryd_queue_waits": 41}`,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeQueued, wantCount: metaQueueWaits, wantN: 42},
		{name: "queued past its bound", err: queued, attempt: 1, metadata: `{"memoryd_queue_waits": 100}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},

		// Held back unsent for another serve's request sent alone: no
		// attempt, even the last, lockWaitBase doubling up to
		// maxAloneWait; nor a crash counted again.
		{name: "alone elsewhere", err: errAloneElsewhere, attempt: 5, metadata: `{"memoryd_model_crashes": 1}`,
			want: snooze, wantSnooze: 100 * time.Millisecond, wantLabel: outcomeQueued, wantCount: metaAloneHolds, wantN: 1},
		{name: "alone elsewhere, counted before", err: errAloneElsewhere, attempt: 2, metadata: `{"memoryd_model_crashes": 1, "memoryd_alone_holds": 59}`,
			want: snooze, wantSnooze: 3200 * time.Millisecond, wantLabel: outcomeQueued, wantCount: metaAloneHolds, wantN: 60},
		{name: "alone elsewhere past its bound", err: errAloneElsewhere, attempt: 2, metadata: `{"memoryd_model_crashes": 1, "memoryd_alone_holds": 60}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},

		// An unreachable model server: snoozed, 2s doubling up to 1m,
		// until the snoozes total the outage bound (2+4+...+32 = 62s,
		// then 1m each, the 14th cut to 58s: 10m exactly), then attempts
		// are spent.
		{name: "model unreachable", err: down, attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 1},
		{name: "model unreachable at the last attempt spends none", err: fmt.Errorf("turn e1: %w", down), attempt: 5, metadata: `{"memoryd_model_waits": 3}`,
			want: snooze, wantSnooze: 16 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 4},
		{name: "model unreachable, capped wait", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 12}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 13},
		{name: "model unreachable, last wait cut to the outage bound", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 13}`,
			want: snooze, wantSnooze: 58 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 14},
		{name: "model unreachable past the outage bound", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 14}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "model unreachable past the outage bound, last attempt", err: down, attempt: 5, metadata: `{"memoryd_model_waits": 14}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		// Snoozes that wakes cut short (metaModelUnwaitedMillis) count as
		// long as they lasted: the bound moves by what was not waited.
		{name: "model unreachable past the nominal bound, 30 s of it not waited", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 14, "memoryd_model_unwaited_ms": 30000}`,
			want: snooze, wantSnooze: 28 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 15},
		{name: "model unreachable past the nominal bound, 5 minutes of it not waited", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 14, "memoryd_model_unwaited_ms": 300000}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 15},
		{name: "model unreachable past the bound and what was not waited", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 15, "memoryd_model_unwaited_ms": 30000}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		// A server refusing memoryd's key or model is waited for alike,
		// and counted as what it is (memoryd_turns_extracted_total).
		{name: "model refuses the configuration", err: fmt.Errorf("turn e1: %w", refused), attempt: 5, metadata: `{"memoryd_model_waits": 3}`,
			want: snooze, wantSnooze: 16 * time.Second, wantLabel: outcomeModelRefused, wantCount: metaModelWaits, wantN: 4},
		{name: "model refuses the configuration, held back and woken", err: heldBackRefused, attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": true}`,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeModelRefused, wantCount: metaWokenHolds, wantN: 1},
		{name: "model refuses the configuration past the outage bound", err: refused, attempt: 5, metadata: `{"memoryd_model_waits": 14}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "model unreachable beside a permanent error", err: errors.Join(down, permanent), attempt: 1,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		// Woken from its snooze (the server answered another process) and
		// held back by this one, whose probe is due in 3 s: it waits for
		// that probe, counted as a hold, not a wait for the server, not a
		// whole snooze, and within the snooze it would have had; past 3
		// holds, as any wait.
		{name: "woken, held back", err: heldBack(3 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": true}`,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeModelDown, wantCount: metaWokenHolds, wantN: 1},
		{name: "woken, held back with the probe due", err: heldBack(0), attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": true, "memoryd_woken_holds": 2}`,
			want: snooze, wantSnooze: minWokenWait, wantLabel: outcomeModelDown, wantCount: metaWokenHolds, wantN: 3},
		{name: "woken, held back, a short snooze ahead", err: heldBack(5 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 0, "memoryd_woken": true}`,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeModelDown, wantCount: metaWokenHolds, wantN: 1},
		{name: "woken, held back past its uncounted holds", err: heldBack(3 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": true, "memoryd_woken_holds": 3}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 13},
		{name: "woken, and the server down when asked", err: down, attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": true}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 13},
		{name: "held back, not woken", err: heldBack(3 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 12, "memoryd_woken": false}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 13},
		// Past the outage bound (or with no waiting), a request held back
		// unsent spends no attempt, its last included, a few times a job:
		// it waits for the probe due (a retry-failed just after the
		// server was fixed: the turns failed again, never sent).
		{name: "woken, held back past the outage bound", err: heldBack(3 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 14, "memoryd_woken": true}`,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeModelDown, wantCount: metaUnsentHolds, wantN: 1},
		{name: "held back past the outage bound, last attempt", err: fmt.Errorf("turn e1: %w", heldBack(0)), attempt: 5, metadata: `{"memoryd_model_waits": 14, "memoryd_unsent_holds": 2}`,
			want: snooze, wantSnooze: minWokenWait, wantLabel: outcomeModelDown, wantCount: metaUnsentHolds, wantN: 3},
		{name: "held back past the outage bound and its holds, last attempt", err: heldBack(3 * time.Second), attempt: 5, metadata: `{"memoryd_model_waits": 14, "memoryd_unsent_holds": 3}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "held back past the outage bound and its holds", err: heldBack(3 * time.Second), attempt: 1, metadata: `{"memoryd_model_waits": 14, "memoryd_unsent_holds": 3}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "held back beside a permanent error", err: errors.Join(heldBack(3*time.Second), permanent), attempt: 1, metadata: `{"memoryd_model_waits": 14}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		// Postgres unreachable (a Postgres walk: a restart, terminated
		// backends, 53300 "too many clients"): the turn is not at fault,
		// so no attempt is spent, on the model server's schedule, up to
		// maxDBOutage (5m: 2+4+...+32 s, then 1m each, the 9th cut to 58 s).
		{name: "db: too many clients", err: fmt.Errorf("unprocessed turns: %w", &pgconn.ConnectError{Config: &pgconn.Config{}}), attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: 53300 at the last attempt spends none", err: fmt.Errorf("save: %w", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}), attempt: 3,
			maxAttempts: 3, want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: backend terminated", err: fmt.Errorf("lock users: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), attempt: 5,
			metadata: `{"memoryd_db_waits": 2}`, want: snooze, wantSnooze: 8 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 3},
		{name: "db: shutting down", err: &pgconn.PgError{Code: "57P03", Message: "the database system is shutting down"}, attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: conn closed", err: fmt.Errorf("extract: %w", pgconn.ErrConnClosed), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: cut mid-query", err: fmt.Errorf("save: %w", io.ErrUnexpectedEOF), attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: connection refused", err: fmt.Errorf("save: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db unreachable past its bound, last attempt", err: &pgconn.PgError{Code: "57P01"}, attempt: 5, metadata: `{"memoryd_db_waits": 9}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "db unreachable past its bound", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 9}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		// A database that takes no writes (25006: a standby after a
		// failover, default_transaction_read_only; an outage soak):
		// not the turn's either.
		{name: "db: read-only at the last attempt spends none", err: fmt.Errorf("save: %w", &pgconn.PgError{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		// A full disk (53100 disk_full): Postgres refuses every write
		// until space is freed, not the turn's (a disk-full walk).
		{name: "db: disk full at the last attempt spends none", err: fmt.Errorf("insert context: %w", &pgconn.PgError{Code: "53100", Message: `could not extend file "base/16384/16754": No space left on device`}), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: disk full past its bound, last attempt", err: &pgconn.PgError{Code: "53100"}, attempt: 5, metadata: `{"memoryd_db_waits": 9}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "db: out of memory is not unreachable", err: &pgconn.PgError{Code: "53200"}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db refusing a statement is not unreachable", err: &pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db: the last wait is cut to the bound", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 8}`,
			want: snooze, wantSnooze: 58 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 9},
		// Its snoozes count as long as they lasted: the bound moves by
		// what the job's metadata credits as not waited of them (their
		// spread, metaDBUnwaitedMillis), and not by the model server's
		// credit.
		{name: "db unreachable past the nominal bound, 30 s of it not waited", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 9, "memoryd_db_unwaited_ms": 30000}`,
			want: snooze, wantSnooze: 28 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 10},
		{name: "db unreachable, last wait lengthened by what was not waited", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 8, "memoryd_db_unwaited_ms": 30000}`,
			want: snooze, wantSnooze: time.Minute, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 9},
		{name: "db unreachable past the bound and what was not waited", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 10, "memoryd_db_unwaited_ms": 30000}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db unreachable past its bound, the model server's credit not its", err: &pgconn.PgError{Code: "57P01"}, attempt: 1, metadata: `{"memoryd_db_waits": 9, "memoryd_model_unwaited_ms": 300000}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db: a dropped database is not unreachable", err: &pgconn.PgError{Code: "57P04"}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db: a protocol violation is not unreachable", err: &pgconn.PgError{Code: "08P01"}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db authentication failure is not unreachable", err: &pgconn.PgError{Code: "28P01"}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		// A new connection refused by a server that cannot write (a full
		// disk: "could not write init file") waits, and so does one
		// refused for its credentials (a password or certificate being
		// rotated: the store reads their files again); one refused for a
		// missing database does not.
		{name: "db: a refused password at connect waits", err: connectErr(&pgconn.PgError{Code: "28P01", Message: "password authentication failed"}), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: a refused client certificate at connect waits", err: connectErr(&pgconn.PgError{Code: "28000", Message: "connection requires a valid client certificate"}), attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "db: a refused password at connect past the bound", err: connectErr(&pgconn.PgError{Code: "28P01"}), attempt: 5, metadata: `{"memoryd_db_waits": 9}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "db: no CONNECT privilege at connect is not unreachable", err: connectErr(&pgconn.PgError{Code: "42501", Message: "permission denied for database"}), attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db: a missing database at connect is not unreachable", err: connectErr(&pgconn.PgError{Code: "3D000", Message: "database does not exist"}), attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "db: could not write init file at connect", err: connectErr(&pgconn.PgError{Severity: "FATAL", Code: "XX000", Message: `could not write init file`}), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeDBDown, wantCount: metaDBWaits, wantN: 1},
		{name: "model network error is the model's", err: &extractor.Error{Kind: extractor.KindTransient, Reason: "reset", Err: &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}}, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},

		// The server went down with the request in flight (cut, then
		// refusing connections): the first time an attempt as any cut, the
		// maxCrashes-th the turn's own failure whatever attempts are left;
		// a permanent error beside it is cancelled as one.
		{name: "model crashed with the request", err: crashed, attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true, wantCrashes: 1},
		{name: "model crashed with the request a second time", err: fmt.Errorf("turn e1: %w", crashed), attempt: 2, metadata: `{"memoryd_model_crashes": 1}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true, wantCrashes: 2},
		{name: "model crashed with the request at the last attempt", err: crashed, attempt: 5,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true, wantCrashes: 1},
		{name: "model crashed beside a permanent error", err: errors.Join(crashed, permanent), attempt: 1, metadata: `{"memoryd_model_crashes": 1}`,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		{name: "lock wait", err: lockWait, attempt: 1,
			want: snooze, wantSnooze: 100 * time.Millisecond, wantLabel: outcomeLockWait, wantCount: metaLockWaits, wantN: 1},
		{name: "deadlock, waited twice", err: deadlock, attempt: 1, metadata: `{"memoryd_lock_waits": 2}`,
			want: snooze, wantSnooze: 400 * time.Millisecond, wantLabel: outcomeLockWait, wantCount: metaLockWaits, wantN: 3},
		{name: "lock wait past its bound", err: lockWait, attempt: 1, metadata: `{"memoryd_lock_waits": 3}`,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "unreadable metadata counts none", err: lockWait, attempt: 1, metadata: `{"memoryd_lock_waits": "x"}`,
			want: snooze, wantSnooze: 100 * time.Millisecond, wantLabel: outcomeLockWait, wantCount: metaLockWaits, wantN: 1},

		{name: "embedding transient", err: fmt.Errorf("embed: %w", &embedding.Error{Kind: embedding.KindTransient, Reason: "status 500"}), attempt: 1,
			want: plain, wantLabel: outcomeRetry, wantRecord: true},
		// An embeddings server that is down is waited for as the model
		// server is (before, each failure spent an attempt), within
		// the same bound, and past it spends attempts.
		{name: "embedding unreachable", err: fmt.Errorf("embed: %w", &embedding.Error{Kind: embedding.KindTransient, Unreachable: true, NotSent: true, Reason: "connection refused"}), attempt: 5,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 1},
		{name: "embedding 503, waited 3 times", err: &embedding.Error{Kind: embedding.KindTransient, Unreachable: true, Status: 503, Reason: "status 503"}, attempt: 1,
			metadata: `{"memoryd_model_waits": 3}`,
			want:     snooze, wantSnooze: 16 * time.Second, wantLabel: outcomeModelDown, wantCount: metaModelWaits, wantN: 4},
		{name: "embedding refuses the configuration", err: &embedding.Error{Kind: embedding.KindTransient, Unreachable: true, Misconfigured: true, Status: 401, Reason: "status 401"}, attempt: 1,
			want: snooze, wantSnooze: 2 * time.Second, wantLabel: outcomeModelRefused, wantCount: metaModelWaits, wantN: 1},
		{name: "embedding unreachable past the bound", err: &embedding.Error{Kind: embedding.KindTransient, Unreachable: true, Status: 502, Reason: "status 502"}, attempt: 1,
			metadata: `{"memoryd_model_waits": 16}`, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "embedding unreachable with a permanent error beside it", err: errors.Join(&embedding.Error{Kind: embedding.KindTransient, Unreachable: true, Reason: "connection refused"},
			&embedding.Error{Kind: embedding.KindPermanent, Reason: "status 400"}), attempt: 1,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "embedding permanent", err: &embedding.Error{Kind: embedding.KindPermanent, Reason: "status 404"}, attempt: 1,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "embedding retry-after", err: &embedding.Error{Kind: embedding.KindRetryAfter, RetryAfter: 3 * time.Second, Reason: "status 429"}, attempt: 1,
			want: snooze, wantSnooze: 3 * time.Second, wantLabel: outcomeRateLimited, wantCount: metaRateLimitWaits, wantN: 1},
		{name: "embedding retry-after past its bound, last attempt", err: &embedding.Error{Kind: embedding.KindRetryAfter, RetryAfter: time.Second},
			attempt: 5, metadata: `{"memoryd_rate_limit_waits": 10}`, want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		// A panic (lastAttemptHandler) and a process that stopped during
		// the run (takeOverWith) are attempts, the last one failing the
		// turns for good; a panic's value is not an error of its own (a
		// database's error it panicked with is no wait).
		{name: "panic", err: panicked{"bug"}, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "panic, last attempt", err: panicked{"bug"}, attempt: 5, want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},
		{name: "panic with a database's error", err: panicked{&pgconn.PgError{Code: "57P01"}}, attempt: 1, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "process stopped", err: errProcessStopped, attempt: 4, want: plain, wantLabel: outcomeRetry, wantRecord: true},
		{name: "process stopped, last attempt of a job with River's default attempts", err: errProcessStopped, attempt: 5, maxAttempts: 25,
			want: cancel, wantLabel: outcomeFailed, wantRecord: true, wantFinal: true},

		{name: "shutdown", err: transient, attempt: 5, shutdown: true, want: snooze, wantSnooze: time.Second, wantLabel: outcomeHandedBack},
		{name: "shutdown, permanent", err: permanent, attempt: 1, shutdown: true, want: snooze, wantSnooze: time.Second, wantLabel: outcomeHandedBack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := &rivertype.JobRow{ID: 1, Attempt: tt.attempt, MaxAttempts: 5, Metadata: []byte(`{}`)}
			if tt.maxAttempts != 0 {
				job.MaxAttempts = tt.maxAttempts
			}
			if tt.metadata != "" {
				job.Metadata = []byte(tt.metadata)
			}
			v := outcome(tt.err, job, tt.shutdown, budget)

			var (
				s *river.JobSnoozeError
				c *river.JobCancelError
			)
			switch tt.want {
			case snooze:
				if !errors.As(v.river, &s) || s.Duration != tt.wantSnooze {
					t.Errorf("River gets %v, want a snooze of %v", v.river, tt.wantSnooze)
				}
			case cancel:
				if !errors.As(v.river, &c) || !errors.Is(v.river, tt.err) {
					t.Errorf("River gets %v, want a cancel wrapping %v", v.river, tt.err)
				}
			default:
				if errors.As(v.river, &s) || errors.As(v.river, &c) || !errors.Is(v.river, tt.err) {
					t.Errorf("River gets %v, want the plain error %v", v.river, tt.err)
				}
			}
			if v.crashes != tt.wantCrashes {
				t.Errorf("verdict counts %d crashes, want %d", v.crashes, tt.wantCrashes)
			}
			if v.label != tt.wantLabel || v.record != tt.wantRecord || v.final != tt.wantFinal || v.count != tt.wantCount || v.n != tt.wantN {
				t.Errorf("verdict = {label %q record %v final %v count %q n %d}, want {%q %v %v %q %d}",
					v.label, v.record, v.final, v.count, v.n, tt.wantLabel, tt.wantRecord, tt.wantFinal, tt.wantCount, tt.wantN)
			}

			// A counted wait for the model server or the database is
			// counted whole (the spread is none here), and fail credits
			// what its spread cuts of it to the wait's own key.
			wantWait, wantUnwaited := time.Duration(0), ""
			switch tt.wantCount {
			case metaModelWaits:
				wantWait, wantUnwaited = tt.wantSnooze, metaModelUnwaitedMillis
			case metaDBWaits:
				wantWait, wantUnwaited = tt.wantSnooze, metaDBUnwaitedMillis
			}
			if v.wait != wantWait || v.unwaited != wantUnwaited {
				t.Errorf("verdict counts a wait of %v credited at %q, want %v at %q", v.wait, v.unwaited, wantWait, wantUnwaited)
			}

			// What River sees through the run's error, and the text its row
			// records.
			end := &jobEnd{op: "extract", label: v.label, river: v.river, cause: tt.err}
			if tt.want == snooze && !errors.As(end, &s) || tt.want == cancel && !errors.As(end, &c) {
				t.Errorf("jobEnd hides the verdict %v from River", v.river)
			}
			if tt.want == plain && (errors.As(end, &s) || errors.As(end, &c)) {
				t.Errorf("jobEnd of a plain error looks like a snooze or cancel")
			}
			if got, want := end.Error(), "extract: "+tt.err.Error(); got != want {
				t.Errorf("job row error %q, want %q", got, want)
			}
		})
	}
}

func TestWorse(t *testing.T) {
	t.Parallel()

	var (
		transient  = &extractor.Error{Kind: extractor.KindTransient, Reason: "t"}
		permanent  = &extractor.Error{Kind: extractor.KindPermanent, Reason: "p"}
		invalid    = &extractor.Error{Kind: extractor.KindInvalidOutput, Reason: "i"}
		retryAfter = &extractor.Error{Kind: extractor.KindRetryAfter, RetryAfter: time.Second, Reason: "r"}
		other      = errors.New("o")
	)
	tests := []struct {
		have, next, want error
	}{
		{nil, retryAfter, retryAfter},
		{retryAfter, transient, transient},
		{retryAfter, invalid, invalid},
		{retryAfter, other, other},
		{transient, retryAfter, transient},
		{transient, invalid, transient}, // the first of a rank is kept
		{transient, permanent, permanent},
		{permanent, transient, permanent},
		{retryAfter, permanent, permanent},
		{permanent, retryAfter, permanent},
	}
	for _, tt := range tests {
		if got := worse(tt.have, tt.next); got != tt.want {
			t.Errorf("worse(%v, %v) = %v, want %v", tt.have, tt.next, got, tt.want)
		}
	}
}

// TestSnoozeCapsHoldWithTheSpread: the most a snooze may last holds with
// its spread, at the spread's worst (a quarter more), and the spread still
// parts the jobs snoozed together. Before, the spread came after the cap: a
// 429 with Retry-After 3600 snoozed jobs for 10m52s and 11m4s (an operator's
// walk), past the documented "at most 10 minutes".
func TestSnoozeCapsHoldWithTheSpread(t *testing.T) {
	t.Parallel()
	budget := retryBudget{maxAttempts: 5, maxLockWaits: 10, maxRateLimitWaits: 10, maxQueueWaits: 100, lockWaitBase: time.Second,
		maxModelOutage: 10 * time.Minute, modelWaitBase: 2 * time.Second,
		spread: func(d time.Duration) time.Duration { return d + d/4 }} // the most spread adds
	snooze := func(err error, metadata string) time.Duration {
		t.Helper()
		job := &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 5, Metadata: []byte(metadata)}
		var s *river.JobSnoozeError
		if v := outcome(err, job, false, budget); !errors.As(v.river, &s) {
			t.Fatalf("%v: River gets %v, want a snooze", err, v.river)
		}
		return s.Duration
	}
	retryAfter := func(d time.Duration) error {
		return &extractor.Error{Kind: extractor.KindRetryAfter, RetryAfter: d, Reason: "status 429"}
	}
	for _, tc := range []struct {
		d, want time.Duration
	}{
		{time.Hour, extractor.MaxRetryAfter * 3 / 4}, // over the cap: spread below it
		{extractor.MaxRetryAfter, extractor.MaxRetryAfter * 3 / 4},
		{9 * time.Minute, extractor.MaxRetryAfter}, // spread, cut at the cap
		{time.Minute, time.Minute * 5 / 4},         // well under it: spread as before
	} {
		if got := snooze(retryAfter(tc.d), `{}`); got != tc.want || got > extractor.MaxRetryAfter {
			t.Errorf("Retry-After %v: snoozed %v, want %v (at most %v)", tc.d, got, tc.want, extractor.MaxRetryAfter)
		}
	}
	lockWait := &pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"}
	if got := snooze(lockWait, `{"memoryd_lock_waits": 6}`); got > maxLockWait {
		t.Errorf("lock wait snoozed %v, over its cap %v", got, maxLockWait)
	}
	down := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, Reason: "status 503"}
	if got := snooze(down, `{"memoryd_model_waits": 8}`); got > maxModelWait {
		t.Errorf("model wait snoozed %v, over its cap %v", got, maxModelWait)
	}
}

// TestSpreadWithinPartsJobsNearTheCap: a delay just under the cap keeps
// its spread, scaled into the room left, so that jobs snoozed together
// come back apart. Before, the spread was cut at the cap: jobs paused
// 9m57s for a model's Retry-After came back at 10m all together.
func TestSpreadWithinPartsJobsNearTheCap(t *testing.T) {
	t.Parallel()
	limit := 10 * time.Minute
	for _, tc := range []struct {
		d     time.Duration
		share float64 // of the spread's most (a quarter of d)
		want  time.Duration
	}{
		{9*time.Minute + 57*time.Second, 0, 9*time.Minute + 57*time.Second},
		{9*time.Minute + 57*time.Second, 0.5, 9*time.Minute + 58500*time.Millisecond},
		{9*time.Minute + 57*time.Second, 1, limit},
		{4 * time.Minute, 0.5, 4*time.Minute + 30*time.Second}, // room enough: as before
		{time.Hour, 1, limit * 3 / 4},
	} {
		b := retryBudget{spread: func(d time.Duration) time.Duration { return d + time.Duration(tc.share*float64(d/4)) }}
		if got := b.spreadWithin(tc.d, limit); got != tc.want {
			t.Errorf("spreadWithin(%v) at %v of the spread: %v, want %v", tc.d, tc.share, got, tc.want)
		}
	}
}

// TestModelWaitsTotalTheOutageBound: a job's snoozes for an unreachable
// model server total --llm-max-outage at most, with their spread at its
// worst, and no less than three quarters of it. Before, the last doubling
// went past it: with 40s the waits were 2+4+8+16+32 = 62 s, 68 s in an
// operator's walk.
func TestModelWaitsTotalTheOutageBound(t *testing.T) {
	t.Parallel()
	for _, outage := range []time.Duration{40 * time.Second, 62 * time.Second, 90 * time.Second, 30 * time.Minute, time.Second} {
		for name, spread := range map[string]func(time.Duration) time.Duration{
			"none": func(d time.Duration) time.Duration { return d },
			"most": func(d time.Duration) time.Duration { return d + d/4 },
		} {
			b := retryBudget{maxAttempts: 5, maxModelOutage: outage, modelWaitBase: 2 * time.Second, spread: spread}
			down := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, Reason: "status 503"}
			var total time.Duration
			waits := 0
			for ; waits < 1000; waits++ {
				job := &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 5, Metadata: []byte(fmt.Sprintf(`{"memoryd_model_waits": %d}`, waits))}
				v := outcome(down, job, false, b)
				var s *river.JobSnoozeError
				if !errors.As(v.river, &s) {
					break
				}
				total += s.Duration
			}
			if total > outage || total < outage*3/4 || waits == 0 {
				t.Errorf("outage %v, spread %s: %d waits total %v, want at most %v and at least %v", outage, name, waits, total, outage, outage*3/4)
			}
		}
	}
}

// TestOutageCreditNeedsABound: what a job's metadata credits as not
// waited moves the bound of its waits, and makes none where there is none:
// fail decides with the bounds at 0 when it cannot count a snooze, and a
// snooze not counted could repeat forever.
func TestOutageCreditNeedsABound(t *testing.T) {
	t.Parallel()
	b := retryBudget{modelWaitBase: 2 * time.Second, spread: func(d time.Duration) time.Duration { return d }}
	meta := []byte(`{"memoryd_model_unwaited_ms": 60000, "memoryd_db_unwaited_ms": 60000}`)
	if d, ok := b.modelWait(0, meta); ok {
		t.Errorf("no model outage bound, a minute credited: a wait of %v", d)
	}
	if d, ok := b.dbWait(0, meta); ok {
		t.Errorf("no database outage bound, a minute credited: a wait of %v", d)
	}
}

// connectErr is a failure to connect that the server answered with pg
// (pgconn's ConnectError wraps it; its field is not exported).
func connectErr(pg *pgconn.PgError) error {
	return fmt.Errorf("unprocessed turns: %w", errors.Join(&pgconn.ConnectError{Config: &pgconn.Config{}}, pg))
}

// TestTakeoverKeepsTheCrashCount: the replacement of a dead process's job
// (carriedOf) keeps how many times the model server went down with the
// job's request in flight, as it keeps its other bounds: without it, a
// turn that crashes the server, its serve killed with it (an OOM kill of
// the host), was sent twice more at each takeover, the first time not
// alone.
func TestTakeoverKeepsTheCrashCount(t *testing.T) {
	got := carriedOf([]byte(`{"memoryd_model_crashes": 1, "memoryd_model_waits": 2}`))
	if string(got[metaModelCrashes]) != "1" || string(got[metaModelWaits]) != "2" {
		t.Errorf("carried %v; want the crash count (1) and the waits (2)", got)
	}
}

// TestUncountedHoldIsNoHold: a run whose snooze cannot be counted (its
// metadata not settable: countSnooze decides again with the bounds at 0)
// is not held back unsent either: an uncounted hold could repeat
// forever. Before, a request held back past the outage bound was snoozed
// for the probe with no count.
func TestUncountedHoldIsNoHold(t *testing.T) {
	t.Parallel()
	b := retryBudget{maxAttempts: 5, maxModelOutage: -1, modelWaitBase: 2 * time.Second, maxUnsentHolds: maxUnsentHolds,
		spread: func(d time.Duration) time.Duration { return d }}
	held := &extractor.Error{Kind: extractor.KindTransient, Unreachable: true, HeldBack: true, ProbeIn: 3 * time.Second, Reason: "not sent"}
	job := &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 5}
	v := outcome(held, job, false, b)
	if v.count != metaUnsentHolds {
		t.Fatalf("verdict %+v, want a hold (metaUnsentHolds)", v)
	}
	// Not run by River: the hold's count cannot be saved.
	v = countSnooze(context.Background(), job, held, v, b)
	var s *river.JobSnoozeError
	if errors.As(v.river, &s) || v.count != "" || v.label != outcomeRetry {
		t.Errorf("uncounted: verdict {river %v label %q count %q}, want an attempt spent (%q)", v.river, v.label, v.count, outcomeRetry)
	}
}

// TestOutcomeRepeatedInvalidReply: invalid output whose replies are those
// of the job's earlier attempt (the same digest) fails the job at once,
// saying so; other replies spend an attempt and keep their digest for the
// next; a permanent error decides as ever; a takeover keeps the digest.
func TestOutcomeRepeatedInvalidReply(t *testing.T) {
	t.Parallel()
	b := retryBudget{maxAttempts: 5, spread: func(d time.Duration) time.Duration { return d }}
	invalid := func(digest string) error {
		return fmt.Errorf("turn e1: %w", &extractor.Error{Kind: extractor.KindInvalidOutput, Reason: "reply contains no JSON object (after 2 model calls)", ReplyDigest: digest})
	}
	job := func(metadata string) *rivertype.JobRow {
		return &rivertype.JobRow{Attempt: 2, MaxAttempts: 5, Metadata: []byte(metadata)}
	}
	var c *river.JobCancelError

	v := outcome(invalid("aa"), job(`{"memoryd_invalid_reply": "aa"}`), false, b)
	if !errors.As(v.river, &c) || !v.final || v.label != outcomeFailed || v.cause == nil || !strings.HasPrefix(v.cause.Error(), repeatedReplyReason) {
		t.Errorf("same replies: verdict %+v, want the job cancelled, failed for good, saying why", v)
	}
	// memoryd failed shows the cause: it names what mends the turn, since
	// retry-failed alone fails it alike.
	if v.cause != nil {
		for _, want := range []string{"--llm-model", "--llm-response-format", "memoryd retry-failed", "reply contains no JSON object"} {
			if !strings.Contains(v.cause.Error(), want) {
				t.Errorf("same replies: cause %q does not name %s", v.cause, want)
			}
		}
	}
	v = outcome(invalid("bb"), job(`{"memoryd_invalid_reply": "aa"}`), false, b)
	if errors.As(v.river, &c) || v.final || v.label != outcomeRetry || v.invalidReply != "bb" {
		t.Errorf("other replies: verdict %+v, want a retry keeping digest bb", v)
	}
	v = outcome(invalid(""), job(`{"memoryd_invalid_reply": ""}`), false, b)
	if v.final || v.invalidReply != "" {
		t.Errorf("replies without a digest: verdict %+v, want a retry, nothing kept", v)
	}
	v = outcome(invalid("aa"), job(`{}`), false, b)
	if v.final || v.invalidReply != "aa" {
		t.Errorf("first invalid output: verdict %+v, want a retry keeping digest aa", v)
	}
	if got := carriedOf([]byte(`{"memoryd_invalid_reply": "aa"}`)); string(got[metaInvalidReply]) != `"aa"` {
		t.Errorf("carried %v, want the digest", got)
	}
}

// TestOutcomeRepeatedInvalidReplyOfSeveralTurns: a job of several failed
// turns repeats only when every turn repeats its replies: the first
// turn's digest alone (its error the worst) does not cancel the job when
// another failed otherwise (a 500, or replies without content).
func TestOutcomeRepeatedInvalidReplyOfSeveralTurns(t *testing.T) {
	t.Parallel()
	b := retryBudget{maxAttempts: 5, spread: func(d time.Duration) time.Duration { return d }}
	invalid := &extractor.Error{Kind: extractor.KindInvalidOutput, Reason: "reply contains no JSON object (after 2 model calls)", ReplyDigest: "aa"}
	job := func(metadata string) *rivertype.JobRow {
		return &rivertype.JobRow{Attempt: 2, MaxAttempts: 5, Metadata: []byte(metadata)}
	}
	failed := []string{"e1", "e2"}
	v := outcome(repliesOf(invalid, failed, []string{"aa", ""}), job(`{"memoryd_invalid_reply": "aa"}`), false, b)
	if v.final || v.invalidReply != "" {
		t.Errorf("e2 failing otherwise: verdict %+v, want a retry, nothing kept", v)
	}
	both := repliesOf(invalid, failed, []string{"aa", "bb"})
	v = outcome(both, job(`{"memoryd_invalid_reply": "aa"}`), false, b)
	if v.final || v.invalidReply == "" || v.invalidReply == "aa" {
		t.Errorf("both invalid, first time: verdict %+v, want a retry keeping the digest of both", v)
	}
	v = outcome(both, job(`{"memoryd_invalid_reply": "`+v.invalidReply+`"}`), false, b)
	if !v.final || v.cause == nil || !strings.HasPrefix(v.cause.Error(), repeatedReplyReason) {
		t.Errorf("both repeated: verdict %+v, want the job cancelled, saying why", v)
	}
	if got := repliesOf(invalid, []string{"e1"}, []string{"aa"}); got != error(invalid) {
		t.Errorf("one failed turn: %v, want its own error", got)
	}
}
