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

// GateCalls counts user's calls holding or waiting for one of their slots
// in s's gate.
func GateCalls(s *Server, user string) int {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if u := s.gate.users[user]; u != nil {
		return u.refs
	}
	return 0
}

// SetWriteStall sets how long the output of s's stdio sessions may take
// none of a write (DefaultWriteStall): a test of a client that stops
// reading waits less.
func SetWriteStall(s *Server, d time.Duration) { s.writeStall = d }
