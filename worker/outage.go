package worker

import (
	"sync/atomic"
	"time"
)

// Outage is a dependency failing the worker since Since (every batch of
// the ingest, or the model server refusing memoryd's configuration), with
// the last error.
type Outage struct {
	Since time.Time
	Err   string
}

// outage holds the current Outage of one dependency, nil while there is
// none; safe for concurrent use (read by the health checks).
type outage struct{ p atomic.Pointer[Outage] }

// fail records err, keeping Since of an outage already under way.
func (o *outage) fail(err error) {
	since := time.Now()
	if cur := o.p.Load(); cur != nil {
		since = cur.Since
	}
	o.p.Store(&Outage{Since: since, Err: err.Error()})
}

// end ends the outage, if there is one.
func (o *outage) end() {
	if o.p.Load() != nil {
		o.p.Store(nil)
	}
}

func (o *outage) load() *Outage { return o.p.Load() }
