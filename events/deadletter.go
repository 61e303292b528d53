package events

// The dead-letter side of the turn contract (docs/protocol.md, "Turn
// events"): memoryd copies an event it rejects to
// "<prefix>.deadletter.<user-token>" in the stream "<turn stream>_DEADLETTER",
// with these headers, and terminates it. Operators read dead letters with
// these names; forgetting a user finds that user's dead letters by them.

// Dead-letter headers: why an event was rejected and where it came from.
const (
	// HeaderReason says why the event was rejected.
	HeaderReason = "Memoryd-Reason"
	// HeaderOriginalSubject is the subject the event was published on.
	HeaderOriginalSubject = "Memoryd-Original-Subject"
	// HeaderStreamSeq is the event's sequence in the turn stream.
	HeaderStreamSeq = "Memoryd-Stream-Seq"
	// HeaderUserToken is the user token of the event's user_id, when the
	// body has one that can be read, so that forgetting the user finds the
	// dead letter whatever subject the event came on.
	HeaderUserToken = "Memoryd-User-Token"
)

// deadLetterSuffix turns a turn stream's name into its dead-letter stream's.
const deadLetterSuffix = "_DEADLETTER"

// DefaultDeadLetterStream is the dead-letter stream of DefaultStream.
const DefaultDeadLetterStream = DefaultStream + deadLetterSuffix

// DeadLetterStream is the name of the dead-letter stream that goes with the
// turn stream named stream: stream + "_DEADLETTER".
func DeadLetterStream(stream string) string { return stream + deadLetterSuffix }

// DeadLetterSubject is the subject a rejected event is copied to:
// "<prefix>.deadletter.<token>", where token is the user token of the
// subject the event came on, or "_" when that subject carried none.
func DeadLetterSubject(prefix, token string) string {
	if token == "" {
		token = "_"
	}
	return prefix + ".deadletter." + token
}

// DeadLetterSubjects is the wildcard subject the dead-letter stream captures.
func DeadLetterSubjects(prefix string) string { return prefix + ".deadletter.>" }
