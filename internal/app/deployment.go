package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// OtherPrefixError is a database that holds another prefix's memory
// (store.Deployment). Memory is keyed by user id alone: two prefixes'
// memoryd on one database would answer each other's users, and one's
// extraction jobs would publish changes under the other's prefix.
type OtherPrefixError struct {
	Recorded store.Deployment
	// Prefix and Stream are this memoryd's.
	Prefix, Stream string
}

func (e *OtherPrefixError) Error() string {
	return fmt.Sprintf("this database holds the memory of prefix %q (stream %s, since %s), not of --prefix %q: a database serves one prefix, "+
		"so give this memoryd a database or schema of its own (--database-url); to move this database to prefix %q for good, "+
		"stop every memoryd using it and run memoryd migrate --prefix %s --stream %s --set-prefix",
		e.Recorded.Prefix, e.Recorded.Stream, e.Recorded.Since.UTC().Format(time.DateOnly), e.Prefix, e.Prefix, e.Prefix, e.Stream)
}

// NewDatabaseError is a database the serve has just created (it did not
// exist: --create-database) that it would attach to a turn stream whose
// ingest consumer has already delivered events: another database recorded
// them (or is recording them), or this one before it was lost. Serving here would take a
// share of the stream's new events from the memoryd that records them (the
// durable consumer is shared), and answer from an empty memory.
type NewDatabaseError struct {
	Stream, Durable string
	// Delivered is the last stream sequence the consumer delivered.
	Delivered uint64
	// Missing says the database was refused before it was created.
	Missing bool
}

func (e *NewDatabaseError) Error() string {
	what := "this database did not exist and was just created"
	if e.Missing {
		what = "this database does not exist (it was not created)"
	}
	return fmt.Sprintf("%s, but the ingest consumer %s of stream %s has delivered its events up to sequence %d: "+
		"they were recorded into another database (or into this one before it was lost). Check --database-url (a mistyped database name is created, see --create-database); "+
		"to rebuild memory from the stream into this database, run memoryd replay with it first",
		what, e.Durable, e.Stream, e.Delivered)
}

// deploymentUse is what a command does with the database's deployment
// record.
type deploymentUse int

const (
	// checkPrefix refuses a database recorded for another prefix.
	checkPrefix deploymentUse = iota
	// claimPrefix also records this prefix when nothing is (replay).
	claimPrefix
	// claimPrefixFresh also refuses, before recording, a database this
	// process has just created while the stream's consumer delivered
	// events (serve). A database that existed is not judged by its content:
	// one upgraded from before migration 039 may hold nothing (every event
	// opted out or rejected) and still be the deployment's.
	claimPrefixFresh
)

// checkDeployment compares the database's deployment record with this
// memoryd's prefix (see deploymentUse); js is needed with claimPrefixFresh.
func (a *App) checkDeployment(ctx context.Context, s *store.Store, js jetstream.JetStream, use deploymentUse) error {
	d, ok, err := s.Deployment(ctx)
	switch {
	case err != nil:
		return err
	case ok && d.Prefix != a.cfg.Prefix:
		return &OtherPrefixError{Recorded: d, Prefix: a.cfg.Prefix, Stream: a.cfg.Stream}
	case ok || use == checkPrefix:
		return nil
	}
	if use == claimPrefixFresh && s.CreatedDatabase() {
		delivered, err := worker.ConsumerDelivered(ctx, js, a.cfg.Stream, a.cfg.Worker.Durable)
		if err != nil {
			return err
		}
		if delivered > 0 {
			return &NewDatabaseError{Stream: a.cfg.Stream, Durable: durableName(a.cfg.Worker.Durable), Delivered: delivered}
		}
	}
	if d, err = s.ClaimDeployment(ctx, a.cfg.Prefix, a.cfg.Stream); err != nil {
		return err
	}
	if d.Prefix != a.cfg.Prefix {
		// Another prefix's process recorded it first.
		return &OtherPrefixError{Recorded: d, Prefix: a.cfg.Prefix, Stream: a.cfg.Stream}
	}
	return nil
}

// refuseNewDatabase refuses, before creating it, a database that does not
// exist (and --create-database would create) while the stream's ingest
// consumer has delivered events: a NewDatabaseError. Refused after
// creating it, the database stayed, and the next start (a restart by
// systemd or Kubernetes) found an existing, empty database and served it.
// checkDeployment still refuses one created by a race with another
// process. js is asked only for a missing database; with natsOptional, a
// NATS server it cannot ask is logged and the database let be created
// (migrate: a first deployment may migrate before NATS runs).
func (a *App) refuseNewDatabase(ctx context.Context, js func() (jetstream.JetStream, error), natsOptional bool) error {
	if a.store != nil || !a.cfg.Store.CreateDatabase {
		return nil
	}
	missing, err := store.DatabaseMissing(ctx, a.cfg.Store)
	if err != nil || !missing {
		return err
	}
	var delivered uint64
	stream, err := js()
	if err == nil {
		delivered, err = worker.ConsumerDelivered(ctx, stream, a.cfg.Stream, a.cfg.Worker.Durable)
	}
	switch {
	case err != nil && natsOptional:
		a.logger.Warn("the database does not exist and is created without reading the stream's ingest consumer: if a memoryd already serves this stream, this is another database (check --database-url)",
			"stream", a.cfg.Stream, "error", err)
		return nil
	case err != nil:
		return err
	case delivered > 0:
		return &NewDatabaseError{Stream: a.cfg.Stream, Durable: durableName(a.cfg.Worker.Durable), Delivered: delivered, Missing: true}
	}
	return nil
}

// RefuseNewDatabase is serve's refusal of a new database
// (refuseNewDatabase) for migrate, which creates a missing database too:
// one migrate created for a mistyped --database-url beside a stream
// already consumed was an existing database to the next serve, which
// served it and took a share of the stream's turns (a review: 5 of 10).
// A NATS server it cannot ask is logged, and the database created, as
// before.
func (a *App) RefuseNewDatabase(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refuseNewDatabase(ctx, a.jetStream, true)
}

func durableName(d string) string {
	if d == "" {
		return worker.DefaultDurable
	}
	return d
}

// SetDeployment records this memoryd's prefix and stream as what the
// database serves, replacing what was recorded, after migrating it: an
// operator moving a deployment to another prefix with every memoryd using
// the database stopped. It returns what was recorded before (had: any).
func (a *App) SetDeployment(ctx context.Context) (prev store.Deployment, had bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.openStore(ctx, true)
	if err != nil {
		return prev, false, err
	}
	// A process is live while its heartbeat is younger than the process
	// timeout (10 s by default, the least any worker uses).
	timeout := max(a.cfg.Worker.ProcessTimeout, 10*time.Second)
	live, err := s.LiveProcesses(ctx, timeout)
	if err != nil {
		return prev, false, err
	}
	if live > 0 {
		// They would go on under the old prefix, and be refused at
		// their next start.
		return prev, false, fmt.Errorf("%d memoryd processes with workers are running on this database (a heartbeat within the last %s): "+
			"stop every memoryd using it first (serves with --role enrich and no embeddings keep no record: stop them too), then run this again", live, timeout)
	}
	// What was recorded before: its stream keeps what the move leaves,
	// for the caller to say.
	if prev, had, err = s.Deployment(ctx); err != nil {
		return prev, false, err
	}
	return prev, had, s.SetDeployment(ctx, a.cfg.Prefix, a.cfg.Stream)
}
