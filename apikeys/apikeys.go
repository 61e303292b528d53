// Package apikeys maps API keys to user ids. Keys are kept only as SHA-256
// hashes: a key file holds one "sha256:<hex> <user_id>" line per key, "#"
// starts a comment. A Set is loaded from a file and/or inline text (an
// environment variable's value, in the same format) and, once started,
// reloads the file when its modification time or size changes.
package apikeys

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// HashPrefix starts every hash in a key file.
const HashPrefix = "sha256:"

// DefaultPollInterval is how often a started Set checks its file for changes.
const DefaultPollInterval = 2 * time.Second

// Config configures a Set. At least one of File and Text must be given.
type Config struct {
	// File is the key file, reloaded on change. Empty: no file.
	File string
	// Text holds more entries in the file's format (lines, or entries
	// separated by ";"), e.g. from an environment variable. Loaded once.
	Text string
	// PollInterval is how often Start's goroutine checks File. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives reload errors. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.File == "" && strings.TrimSpace(c.Text) == "" {
		return errors.New("apikeys: File or Text is required (no keys configured)")
	}
	return nil
}

// entry is one key: its hash and the user it stands for.
type entry struct {
	hash [sha256.Size]byte
	user string
	line int // in its file, from 1
}

// Set answers which user a key belongs to. It is safe for concurrent use.
type Set struct {
	cfg    Config
	inline []entry

	mu      sync.RWMutex
	entries []entry
	mtime   time.Time
	size    int64
	gone    bool // the file was removed after a load: its keys are revoked
	revoked int  // while gone: how many keys the file held

	stop chan struct{}
	done chan struct{}
}

// New loads the keys of cfg; a bad line is an error naming it.
func New(cfg Config) (*Set, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	inline, err := parse(strings.NewReader(strings.ReplaceAll(cfg.Text, ";", "\n")), "inline keys")
	if err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, inline: inline}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// parse reads key lines from r; name labels errors ("keys.txt line 3: ...").
func parse(r io.Reader, name string) ([]entry, error) {
	var out []entry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		e, ok, err := parseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if ok {
			e.line = n
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// parseLine reads one line of a key file: ok is false for a blank line or
// a comment.
func parseLine(line string) (e entry, ok bool, err error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return e, false, nil
	}
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return e, false, fmt.Errorf("want %q, got %d fields", HashPrefix+"<hex> <user_id>", len(fields))
	}
	hexHash, found := strings.CutPrefix(fields[0], HashPrefix)
	if !found {
		return e, false, fmt.Errorf("the hash must start with %q (keys are stored hashed, never in plaintext)", HashPrefix)
	}
	raw, err := hex.DecodeString(hexHash)
	if err != nil || len(raw) != sha256.Size {
		return e, false, fmt.Errorf("the hash is not %d hex digits", 2*sha256.Size)
	}
	copy(e.hash[:], raw)
	e.user = fields[1]
	return e, true, nil
}

// Reload re-reads the file when its modification time or size changed since
// the last load and reports whether it did. On an error the keys loaded
// before stay in force, but a file removed after a load revokes its keys
// (the inline ones stay): an operator who deletes it to revoke every key
// must not find them still working (they did, with an error logged every
// poll). Gone reports that state; a file put back is loaded again.
func (s *Set) Reload() (bool, error) {
	if s.cfg.File == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.entries == nil {
			s.entries = s.inline
		}
		return false, nil
	}
	st, err := os.Stat(s.cfg.File)
	if errors.Is(err, fs.ErrNotExist) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.entries == nil || s.gone {
			return false, fmt.Errorf("apikeys: %w", err) // never loaded (New): a wrong path
		}
		s.revoked = len(s.entries) - len(s.inline) // the file's: entries are the inline ones, then the file's
		s.entries, s.gone, s.mtime, s.size = slices.Clone(s.inline), true, time.Time{}, -1
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("apikeys: %w", err)
	}
	s.mu.RLock()
	same := s.entries != nil && !s.gone && st.ModTime().Equal(s.mtime) && st.Size() == s.size
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	f, err := os.Open(s.cfg.File)
	if err != nil {
		return false, fmt.Errorf("apikeys: %w", err)
	}
	defer f.Close()
	fromFile, err := parse(f, s.cfg.File)
	if err != nil {
		return false, fmt.Errorf("apikeys: %w", err)
	}
	all := append(append([]entry{}, s.inline...), fromFile...)
	s.mu.Lock()
	s.entries, s.mtime, s.size, s.gone, s.revoked = all, st.ModTime(), st.Size(), false, 0
	s.mu.Unlock()
	return true, nil
}

// Gone reports whether the file was removed after a load, revoking its
// keys (Reload).
func (s *Set) Gone() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gone
}

// Lookup returns the user of key. Every stored hash is compared in constant
// time, so the time taken does not tell how close a guess came.
func (s *Set) Lookup(key string) (userID string, ok bool) {
	if key == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(key))
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, e := range s.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 && !ok {
			userID, ok = e.user, true
		}
	}
	return userID, ok
}

// Len is the number of keys loaded.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entries)
}

// Start starts the goroutine that reloads the file on change (none without
// a file). Stop ends it.
func (s *Set) Start() {
	if s.cfg.File == "" || s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.poll()
			}
		}
	}()
}

// poll is one of Start's checks: Reload, and a log line for what changed
// or failed.
func (s *Set) poll() {
	changed, err := s.Reload()
	switch {
	case err != nil && s.Gone() && errors.Is(err, fs.ErrNotExist):
		// Still missing: said once, as it happened.
	case err != nil && s.Gone():
		// Put back but unreadable: its keys stay revoked, and the
		// operator must hear why (this was silent).
		s.cfg.Logger.Error("api keys file back but not read, its keys stay revoked", "file", s.cfg.File, "error", err)
	case err != nil:
		s.cfg.Logger.Error("api keys not reloaded, the previous keys stay in force", "file", s.cfg.File, "error", err)
	case changed && s.Gone():
		// revoked: the file's keys; keys: those still in force (the
		// inline ones), as "api keys reloaded" counts them.
		s.mu.RLock()
		revoked := s.revoked
		s.mu.RUnlock()
		s.cfg.Logger.Warn("api keys file removed: the keys it held are revoked until it is back", "file", s.cfg.File, "revoked", revoked, "keys", s.Len())
	case changed:
		s.cfg.Logger.Info("api keys reloaded", "file", s.cfg.File, "keys", s.Len())
	}
}

// Stop stops the reload goroutine and waits for it.
func (s *Set) Stop() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop = nil
}

// Hash is the key file form of key: "sha256:<hex>".
func Hash(key string) string {
	h := sha256.Sum256([]byte(key))
	return HashPrefix + hex.EncodeToString(h[:])
}

// Generate returns a new random key ("mk-" and 64 hex digits).
func Generate() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("apikeys: generate: %w", err)
	}
	return "mk-" + hex.EncodeToString(b[:]), nil
}

// MaxUserIDBytes is the longest user id a key may stand for: the limit of
// memoryd's requests (events.MaxUserIDBytes; apikeys imports no sibling).
const MaxUserIDBytes = 256

// ErrInvalid is wrapped by the errors of arguments Add and Revoke refuse
// before they touch the file (a user id or a hash prefix), so that a
// command can tell them from a file that could not be read or written.
var ErrInvalid = errors.New("invalid argument")

// Add generates a key for userID, appends its hash to file (created with
// mode 0600 when missing) and returns the key, which is stored nowhere else.
func Add(file, userID string) (string, error) {
	// Any Unicode space, not only ASCII's: the reader splits and trims
	// lines at all of them (strings.Fields), so a no-break space or a
	// vertical tab at an id's end would make the key another user's, and
	// one inside would make a line the reader refuses.
	if userID == "" || strings.ContainsRune(userID, '#') || strings.IndexFunc(userID, unicode.IsSpace) >= 0 {
		return "", fmt.Errorf("apikeys: user id %q must be non-empty without spaces (of any kind) or '#': %w", userID, ErrInvalid)
	}
	// A user id memoryd refuses would make a key every call of which is
	// refused (mcp --user refuses such an id at start).
	if len(userID) > MaxUserIDBytes || !utf8.ValidString(userID) || strings.ContainsRune(userID, utf8.RuneError) {
		return "", fmt.Errorf("apikeys: user id %.40q… must be valid UTF-8 of at most %d bytes without U+FFFD, as memoryd takes it: %w", userID, MaxUserIDBytes, ErrInvalid)
	}
	key, err := Generate()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("apikeys: %w", err)
	}
	// Revoke rewrites the file under this lock: an append meanwhile would
	// be overwritten.
	if err := lockFile(f); err != nil {
		f.Close()
		return "", fmt.Errorf("apikeys: lock %s: %w", file, err)
	}
	lead := ""
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if r, err := os.Open(file); err == nil {
			if _, err := r.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
				lead = "\n" // the file's last line has no newline: do not extend it
			}
			r.Close()
		}
	}
	if _, err := fmt.Fprintf(f, "%s%s %s\n", lead, Hash(key), userID); err != nil {
		f.Close()
		return "", fmt.Errorf("apikeys: write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("apikeys: write %s: %w", file, err)
	}
	return key, nil
}

// Line is one key of a key file, as List reads it.
type Line struct {
	// Number is the line's number in the file, from 1.
	Number int
	// Hash is the key's hash as the file holds it ("sha256:<hex>").
	Hash   string
	UserID string
}

// List reads the keys of file, in file order; a bad line is an error
// naming it.
func List(file string) ([]Line, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("apikeys: %w", err)
	}
	defer f.Close()
	es, err := parse(f, file)
	if err != nil {
		return nil, fmt.Errorf("apikeys: %w", err)
	}
	out := make([]Line, len(es))
	for i, e := range es {
		out[i] = e.asLine()
	}
	return out, nil
}

func (e entry) asLine() Line {
	return Line{Number: e.line, Hash: HashPrefix + hex.EncodeToString(e.hash[:]), UserID: e.user}
}

// Revoke deletes from file the lines of keys that match: of userID when it
// is not empty, whose hash starts with hashPrefix ("sha256:<hex digits>",
// or the hex digits alone: at least MinHashPrefix of them) when that is not
// empty; at least one must be given. Other lines, comments included, stay
// as they are. The file is rewritten in place (a symlink's target; its
// owner and mode kept) under an exclusive lock that Add takes too, so a
// key added meanwhile is not lost; a proxy reloading it while it is
// written may read it cut, refuses that (keeping the keys it had) and
// reads it whole at its next check. It returns the lines deleted; none
// matching is an error.
func Revoke(file, userID, hashPrefix string) ([]Line, error) {
	// As keys list prints it: "sha256:a6a0d935a6e143a8…" (or "..." typed).
	hashPrefix = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(hashPrefix), HashPrefix), "…"), "...")
	switch {
	case userID == "" && hashPrefix == "":
		return nil, fmt.Errorf("apikeys: revoke needs a user id or a hash prefix: %w", ErrInvalid)
	case hashPrefix != "" && (len(hashPrefix) < MinHashPrefix || strings.Trim(hashPrefix, "0123456789abcdef") != ""):
		return nil, fmt.Errorf("apikeys: a hash prefix names one key with at least %d hex digits, not %q: %w", MinHashPrefix, hashPrefix, ErrInvalid)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("apikeys: %w", err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return nil, fmt.Errorf("apikeys: lock %s: %w", file, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("apikeys: read %s: %w", file, err)
	}
	es, err := parse(bytes.NewReader(data), file)
	if err != nil {
		return nil, fmt.Errorf("apikeys: %w", err)
	}
	drop := map[int]bool{}
	var gone []Line
	for _, e := range es {
		if (userID == "" || e.user == userID) && strings.HasPrefix(hex.EncodeToString(e.hash[:]), hashPrefix) {
			drop[e.line] = true
			gone = append(gone, e.asLine())
		}
	}
	if len(gone) == 0 {
		// Named as asked for, and only that: `hash prefix ""` for a revoke
		// by user read as if an empty prefix had been given.
		what := "no key"
		if userID != "" {
			what += fmt.Sprintf(" of user %q", userID)
		}
		if hashPrefix != "" {
			what += fmt.Sprintf(" whose hash starts with %q", HashPrefix+hashPrefix)
		}
		return nil, fmt.Errorf("apikeys: %s in %s", what, file)
	}
	var b strings.Builder
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if !drop[i+1] {
			b.WriteString(line)
		}
	}
	_, err = f.WriteAt([]byte(b.String()), 0)
	if err == nil {
		err = f.Truncate(int64(b.Len()))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("apikeys: write %s: %w", file, err)
	}
	return gone, nil
}

// MinHashPrefix is the fewest hex digits Revoke takes as a hash prefix:
// enough that a prefix names one key.
const MinHashPrefix = 8
