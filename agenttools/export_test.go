package agenttools

// LiveSessions counts the sessions of s's HTTP server (after Start).
func LiveSessions(s *Server) int {
	n := 0
	for range s.sessions.Sessions() {
		n++
	}
	return n
}
