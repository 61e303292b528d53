package extractor

import (
	"context"
	"time"

	"github.com/memoryd/memoryd/internal/modelerr"
)

// A connection cut mid-request is told apart from a server that went down
// with the request (Error.Crashed) by connecting to the server again right
// away: a process that died closed its listener with its connections (a
// supervisor restarts it seconds or minutes later), one that only dropped
// the connection (an idle timeout, a balancer) still accepts. It dials up
// to crashDials times, crashDialGap apart (the listener may close just
// after the connections), each bounded by crashDialTimeout.
const (
	crashDials       = 3
	crashDialGap     = 20 * time.Millisecond
	crashDialTimeout = time.Second
)

// refusesConnections reports whether the model server's address refuses a
// TCP connection now (refused, or its host unreachable), within dials
// tries crashDialGap apart (modelerr.RefusesConnections). False when the
// requests go through a proxy: the cut may be the proxy's.
func (l *LLM) refusesConnections(ctx context.Context, dials int) bool {
	return modelerr.RefusesConnections(ctx, l.cfg.BaseURL, l.cfg.HTTPClient, dials, crashDialGap, crashDialTimeout)
}

// RefusesConnections reports whether the model server's address refuses
// a TCP connection now (refusesConnections, one dial of at most
// crashDialTimeout): a server down, restarting after a crash. The worker
// asks it before waking jobs whose requests would only meet it down. One
// dial, not crashDials: no request was just cut, so no listener may be
// closing just after its connections, and a wake of a server that
// accepts waits one connection's time, not crashDialGap more.
func (l *LLM) RefusesConnections(ctx context.Context) bool { return l.refusesConnections(ctx, 1) }

type aloneKey struct{}

// Alone returns ctx marked so that an [LLM]'s request made with it is
// sent alone: it waits for every request of the LLM in flight to end and
// holds the others back until it has its answer (it takes every
// MaxConcurrency slot, within the same bound as a wait for one). A
// caller asks it for an input the server went down with before
// ([IsCrashed]): a crash cuts every request in flight, and only one sent
// alone tells whether that input brings the server down.
func Alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

func alone(ctx context.Context) bool { v, _ := ctx.Value(aloneKey{}).(bool); return v }
