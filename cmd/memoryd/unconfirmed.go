package main

import (
	"errors"
	"fmt"

	"github.com/memoryd/memoryd/store"
)

// mayBeDone is a command's error that left a database write in doubt
// (store.ErrCommitUnconfirmed: its connection lost once the COMMIT was
// sent), with what the operator may do about it.
type mayBeDone struct {
	err  error
	hint string
}

func (e *mayBeDone) Error() string { return fmt.Sprintf("%s (%s)", e.err, e.hint) }
func (e *mayBeDone) Unwrap() error { return e.err }

// ifUnconfirmed returns err with hint, one sentence saying what may have
// been done and what is safe to do next, when err leaves a database
// write in doubt; any other err as it is. Operator commands that write
// to Postgres themselves give their hint here; run gives unconfirmedHint
// to a command that gave none. A write in doubt that is a migration
// (store.MigrationError: serve, replay and embed migrate at their start)
// gets migrateHint whatever the command's hint, which speaks of its own
// writes.
func ifUnconfirmed(err error, hint string) error {
	if !errors.Is(err, store.ErrCommitUnconfirmed) {
		return err
	}
	var given *mayBeDone
	if errors.As(err, &given) {
		return err
	}
	if migration := (*store.MigrationError)(nil); errors.As(err, &migration) {
		hint = migrateHint
	}
	return &mayBeDone{err: err, hint: hint}
}

// migrateHint is migrate's hint for a write in doubt, and that of a
// migration in doubt at serve's, replay's or embed's start.
const migrateHint = "a database commit of migrate was not confirmed: a migration or the prefix may be recorded already; running migrate again is safe, it applies only the migrations not recorded"

// unconfirmedHint is run's hint for a write in doubt whose command gave
// none: a bare "commit not confirmed" read as a failure, and the
// operator ran again what may have been done.
const unconfirmedHint = "its database commit was not confirmed: the change may have been made; check what it changed before running it again"
