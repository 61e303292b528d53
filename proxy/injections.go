package proxy

import (
	"crypto/sha256"
	"strconv"
	"sync"
	"time"
)

// A tool-call loop sends the same user message in every round, followed by
// the assistant's calls and the tools' results. Enriched anew in each
// round, the message changed under the model whenever memory changed
// between rounds (the turn before, published meanwhile, is enough): the
// model server's prefix cache missed for the whole loop, and each round
// cost an enrich. So the proxy keeps what it sent with each last user
// message for a while, and a request that continues one (messages after
// it) gets the same injection, or none if none was sent.

const (
	// injectionTTL is how long an injection is kept for the rounds that
	// continue its message: a tool loop's rounds follow each other within
	// seconds to minutes.
	injectionTTL = 10 * time.Minute
	// maxInjections bounds the injections kept (an injection is up to
	// about 8 KB, enrich's default token budget: 8 MB at most); past it
	// the oldest go first.
	maxInjections = 1024
)

// injections holds the injections sent with recent last user messages,
// by user, the message's index in the request and its text. Safe for
// concurrent use.
type injections struct {
	mu    sync.Mutex
	byKey map[[32]byte]injectionEntry
	// order is byKey's keys, oldest first (an entry set again is appended
	// again; its older place is skipped when it comes up).
	order []injectionKey
}

type injectionEntry struct {
	text string
	at   time.Time
}

type injectionKey struct {
	key [32]byte
	at  time.Time
}

func injectionKeyOf(user string, index int, text string) [32]byte {
	return sha256.Sum256([]byte(user + "\x00" + strconv.Itoa(index) + "\x00" + text))
}

// get returns the injection sent with the user's message at index, if one
// was sent within injectionTTL of now.
func (c *injections) get(user string, index int, text string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[injectionKeyOf(user, index, text)]
	if !ok || now.Sub(e.at) > injectionTTL {
		return "", false
	}
	return e.text, true
}

// forget drops what was recorded for the user's message at index: a
// request that sent it without its injection (enrich failed) must not
// have its next round given an older one.
func (c *injections) forget(user string, index int, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byKey, injectionKeyOf(user, index, text))
}

// put records the injection sent with the user's message at index.
func (c *injections) put(user string, index int, text, injection string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[[32]byte]injectionEntry{}
	}
	k := injectionKeyOf(user, index, text)
	c.byKey[k] = injectionEntry{text: injection, at: now}
	c.order = append(c.order, injectionKey{key: k, at: now})
	// Drop the expired and, past the bound, the oldest.
	for len(c.order) > 0 {
		o := c.order[0]
		e, ok := c.byKey[o.key]
		switch {
		case !ok || !e.at.Equal(o.at):
			// Set again since (or gone): a later place holds it.
		case len(c.byKey) > maxInjections || now.Sub(e.at) > injectionTTL:
			delete(c.byKey, o.key)
		default:
			return
		}
		c.order = c.order[1:]
	}
}
