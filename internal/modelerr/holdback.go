package modelerr

import (
	"fmt"
	"time"
)

// MinHoldBack is how long a server must have counted as down before a
// client holds its requests back (HoldBack; at most the gap's bound): a
// blip (a gateway's lone 502, a restart under a second) holds nothing
// back.
const MinHoldBack = time.Second

// HoldBack decides, for a client whose server has counted as down for
// down (0 or less: not down), sinceProbe after it last let a request
// through to probe it (probing while that one has no outcome yet), whether
// a request is sent as the next probe, held back unsent (with probeIn,
// how long until the next probe may go: a whole gap while one is in
// flight, since its outcome is not known yet), or sent as usual (neither).
// One request goes at most every gap, a quarter of the outage so far and
// at most maxGap, and only when the one before has ended; none is held
// back with maxGap below 0. The LLM client (extractor) and the embeddings
// client (embedding) hold back alike.
func HoldBack(down, sinceProbe time.Duration, probing bool, maxGap time.Duration) (probe, held bool, probeIn time.Duration) {
	if maxGap < 0 || down <= 0 || down < min(MinHoldBack, maxGap) {
		return false, false, 0
	}
	gap := min(down/4, maxGap)
	if !probing && sinceProbe >= gap {
		return true, false, 0
	}
	probeIn = max(gap-sinceProbe, 0)
	if probing {
		probeIn = max(probeIn, gap)
	}
	return false, true, probeIn
}

// Prober is a client's probing of a server that counts as down: when it
// last let a request through (Admit) and whether that one has an outcome
// yet (Done). The LLM client and the embeddings client keep one each,
// guarded by their own lock.
type Prober struct {
	probed  time.Time
	probing bool
}

// Start dates the probing from now, when the server is taken for down:
// the first probe goes a gap later.
func (p *Prober) Start(now time.Time) { p.probed = now }

// Admit is HoldBack for a server down for down at now; a request it lets
// through as a probe is in flight until Done.
func (p *Prober) Admit(now time.Time, down, maxGap time.Duration) (probe, held bool, probeIn time.Duration) {
	probe, held, probeIn = HoldBack(down, now.Sub(p.probed), p.probing, maxGap)
	if probe {
		p.probed, p.probing = now, true
	}
	return probe, held, probeIn
}

// Done ends the probe in flight: the next may be sent.
func (p *Prober) Done() { p.probing = false }

// GiveBack undates the probe Admit let through at probed, which told
// nothing of the server (its caller gave up before an answer): the next
// request may probe at once.
func (p *Prober) GiveBack(probed time.Time) {
	if p.probed.Equal(probed) {
		p.probed = time.Time{}
	}
}

// HeldReason is the reason a held-back request is told: that server
// ("the model server") counts as down, or "refused" when the error has
// said it refuses the configuration (it is up, and "down" would point at
// the server, not the key), since when, and the last probe's reason. The
// same words for every request of one outage (no duration: the health
// check has it), so that the failures of one outage read alike.
func HeldReason(server string, refused bool, since time.Time, maxGap time.Duration, last string) string {
	what := server + " counts as down"
	if refused {
		what = "refused"
	}
	return fmt.Sprintf("not sent, %s since %s and probed by one request at a time, at most every %s; the last one: %s",
		what, since.UTC().Format(time.RFC3339), maxGap, last)
}
