// Package systest holds memoryd's system tests: they build the real memoryd
// binary once (TestMain), run it as users do (`memoryd serve` as a child
// process, client commands as separate processes) against the real Postgres
// and NATS servers, inject faults (SIGKILL, a Postgres cut, a NATS restart, a
// misbehaving model server) and check the promises of README.md and docs/,
// including that every `memoryd …` command the docs show runs as shown.
//
// Run them on their own with
//
//	go test -race -count=1 ./systest/
//
// The binary is built without the race detector (the test process itself
// runs with it); MEMORYD_SYSTEST_RACE=1 builds it with -race too. Heavy tests
// (thousands of turns, several processes) run one at a time, and every serve
// process gets a small Postgres pool, so the suite stays far below the
// server's max_connections.
package systest
