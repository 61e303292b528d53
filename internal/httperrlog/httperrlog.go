// Package httperrlog routes the errors net/http's servers log (a failed
// accept, a TLS handshake, a handler's panic) through memoryd's logger.
//
// An http.Server without an ErrorLog writes them with the standard log
// package: plain text on stderr, outside --log-format json, with no level,
// and as often as the server retries. A small host's operator walk (serve
// under a file-descriptor limit of 64, the proxy under 1024 with 1500
// clients) saw "http: Accept error: accept tcp ...: accept4: too many open
// files; retrying in 5ms" 167 times in two seconds, unparsed by a JSON log
// pipeline and naming no remedy.
package httperrlog

import (
	"log"
	"log/slog"
	"strings"
	"syscall"
)

// MsgAccept is the message of a failed accept: one fixed message, so that
// a logger holding back repeats (cmd/memoryd's) can key on it.
const MsgAccept = "http: cannot accept a connection"

// MsgServer is the message of net/http's other errors.
const MsgServer = "http server error"

// HintNoFiles is what a failed accept for want of file descriptors adds.
const HintNoFiles = "the process is out of file descriptors (each client connection, Postgres connection and upstream request takes one): raise its open files limit (systemd LimitNOFILE=, ulimit -n, a container's nofile ulimit) or bound the clients; it accepts again by itself once descriptors are free"

// New returns an ErrorLog for an http.Server that logs through logger at
// warning level: failed accepts as MsgAccept (with HintNoFiles when they
// are out of file descriptors), the rest as MsgServer, a handler's panic
// at error level.
func New(logger *slog.Logger) *log.Logger {
	return log.New(writer{logger}, "", 0)
}

type writer struct{ logger *slog.Logger }

func (w writer) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	rest, accept := strings.CutPrefix(line, "http: Accept error: ")
	if !accept {
		if strings.HasPrefix(line, "http: panic serving") {
			// A handler's panic, with its stack: a bug, not a client's.
			w.logger.Error(MsgServer, "error", strings.TrimPrefix(line, "http: "))
			return len(p), nil
		}
		w.logger.Warn(MsgServer, "error", strings.TrimPrefix(line, "http: "))
		return len(p), nil
	}
	attrs := []any{"error", rest}
	if noFiles(rest) {
		attrs = append(attrs, "hint", HintNoFiles)
	}
	w.logger.Warn(MsgAccept, attrs...)
	return len(p), nil
}

// noFiles reports whether a failed accept's text is the process's or the
// system's file descriptor limit (EMFILE, ENFILE: net/http gives the
// error as text only).
func noFiles(s string) bool {
	return strings.Contains(s, syscall.EMFILE.Error()) || strings.Contains(s, syscall.ENFILE.Error())
}
