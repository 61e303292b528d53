// Package enricher is memoryd's request-reply side: the NATS micro service
// "memoryd" that frontends call before every model call (enrich) and that a
// model's memory tool calls are forwarded to (search, store, clear, facts).
// docs/protocol.md is the wire contract; its request/reply types and the Go
// client live in package events, which frontends import without linking the
// service's Postgres and River dependencies.
//
// Subjects are "<prefix>.<endpoint>.<user-token>", token as events.UserToken.
// A request whose user_id does not map to the subject's token is refused, so
// plain NATS subject permissions decide which users a frontend may read.
// Endpoints use the micro default queue group: any number of instances share
// the load, and each request is answered by one of them.
//
// Concurrency: a micro endpoint delivers its requests one at a time, so each
// handler validates a request on the delivery goroutine (bad requests are
// answered there, with code 400, and counted in the micro stats) and runs the
// Postgres work on a goroutine of its own. The handler never waits: enrich,
// search and the other endpoints each have their own limit of requests
// worked on at once (Config.MaxInFlight, MaxSearchInFlight, MaxToolInFlight)
// and of requests waiting for a turn, search and the tools also one per user
// (MaxUserInFlight, with four times as many of the user waiting), so enrich
// never waits behind search or the tools, and a request past a limit is
// answered (degraded, or 500 overloaded) rather than queued. Server-side errors and degraded replies are therefore counted in
// each endpoint's stats "data", not in micro's num_errors.
//
// Degradation: enrich never fails because memory is unavailable. If Postgres
// does not answer within Config.Timeout of the request's arrival (slow,
// stopped, unreachable, or the service is saturated), the reply is sent
// anyway: empty lists, "degraded": true and a reason. Only invalid requests
// are errors. The other endpoints are writes and explicit reads: they wait
// up to Config.WriteTimeout (a forget's database side Config.ForgetTimeout)
// and fail with code 500.
//
// Writes (store, clear, facts.set, facts.clear) are synchronous: the reply is
// sent after Postgres committed.
package enricher
