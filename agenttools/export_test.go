package agenttools

import "time"

// LiveSessions counts the sessions of s's HTTP server (after Start).
func LiveSessions(s *Server) int {
	n := 0
	for range s.sessions.Sessions() {
		n++
	}
	return n
}

// SetSessionClock makes now the clock of the sessions cap of s's next
// Handler: a test moves it past newSessionGrace without waiting.
func SetSessionClock(s *Server, now func() time.Time) { s.now = now }

// NewSessionGrace is newSessionGrace.
const NewSessionGrace = newSessionGrace
