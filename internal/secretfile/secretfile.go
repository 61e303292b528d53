// Package secretfile reads credentials kept in files (a password, a token,
// an API key), again whenever the file changes, so that an operator
// rotates one by writing the new value to the file: memoryd's clients use
// it from their next connection or request, without a restart. A
// Kubernetes secret volume (its atomic symlink swap is seen) is the usual
// source, or a file an operator's tooling renews; not a copy made once at
// start (a secret mounted with subPath, a systemd LoadCredential=).
package secretfile

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
)

// MsgUnread is logged when a credential file that was read before cannot
// be read (removed, emptied, its permissions changed): the value last read
// stays in use. Logged once until the file reads again.
const MsgUnread = "credential file cannot be read; using the value last read from it"

// File is a credential read from a file: the file's content less one
// trailing line break ("echo key > file" writes one). Value reads the file
// again when its size, modification or status change time, device or
// inode changed since the last
// read (a stat, a few microseconds), so that a request per second or a
// reconnect per quarter second costs nothing noticeable. Safe for
// concurrent use.
type File struct {
	path, what string
	logger     *slog.Logger

	mu      sync.Mutex
	value   string
	stamp   stamp
	failing bool // the last read failed, and was logged
}

// stamp is what tells that a file changed without reading it.
type stamp struct {
	// mod and change are the modification and status change times, Unix
	// nanoseconds: the first can be set by hand (cp -p, install -p),
	// the second not.
	size, mod, change int64
	dev, inode        uint64
}

func stampOf(fi os.FileInfo) stamp {
	s := stamp{size: fi.Size(), mod: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.inode, s.change = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return s
}

// Open reads the credential at path, what naming it in errors and logs
// ("nats password", "llm api key"). A file that cannot be read or is
// empty is an error: the server would take an empty credential for none.
// An empty path is no file: nil, whose ValueOr gives the credential
// given as a value.
func Open(path, what string, logger *slog.Logger) (*File, error) {
	if path == "" {
		return nil, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	f := &File{path: path, what: what, logger: logger}
	v, st, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	f.value, f.stamp = v, st
	return f, nil
}

// ValueOr is Value, or value when f is nil (the credential was given as
// a value, not a file).
func (f *File) ValueOr(value string) string {
	if f == nil {
		return value
	}
	return f.Value()
}

// Value is the credential now: the file read again if it changed, else the
// value last read. A file that cannot be read, or reads empty, gives the
// value last read (the connection or request then stands as it would have
// with a credential given once), and a warning the first time.
func (f *File) Value() string {
	fi, err := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && stampOf(fi) == f.stamp && !f.failing {
		return f.value
	}
	v, st, err := read(f.path)
	if err != nil {
		if !f.failing {
			f.failing = true
			f.logger.Warn(MsgUnread, "credential", f.what, "error", err)
		}
		return f.value
	}
	if f.failing {
		f.failing = false
		f.logger.Info("credential file read again", "credential", f.what)
	}
	f.value, f.stamp = v, st
	return v
}

// maxBytes bounds what is read of a credential file: a path given by
// mistake (a log, a disk image) is refused rather than read whole.
const maxBytes = 64 << 10

// read reads the credential at path, with the stamp of what it read (the
// open file's, so that the two belong together when the file is replaced
// meanwhile).
func read(path string) (string, stamp, error) {
	// Non-blocking: opening a pipe with no writer left (a shell's
	// <(...) once read, a named pipe) blocks until one comes, which a
	// reconnect would wait for holding nats.go's connection lock, and a
	// request every other request of the client.
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", stamp{}, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", stamp{}, err
	}
	if fi.Mode()&(os.ModeNamedPipe|os.ModeSocket|os.ModeDevice|os.ModeCharDevice) != 0 {
		// Read once, it cannot be read again when the credential changes.
		return "", stamp{}, fmt.Errorf("%s is a pipe or a device, not a file: give a file that holds the credential", path)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxBytes+1))
	switch {
	case err != nil:
		return "", stamp{}, err
	case len(b) > maxBytes:
		return "", stamp{}, fmt.Errorf("%s is over %d KiB: not a credential", path, maxBytes>>10)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", stamp{}, fmt.Errorf("%s is empty", path)
	}
	return v, stampOf(fi), nil
}
