package embedding

import (
	"sync"
	"unicode/utf8"
)

// minLearnedCut is the shortest length InputSizes.Limit cuts to, and
// half the shortest refusal it learns from: about 250 tokens, under any
// embedding model's context (the worker's shortest start of a refused
// text is the same). A text shorter than twice it refused alone is taken
// for refused for what it holds, not its length: learnt from, it would
// cut every later query to a few hundred bytes.
const minLearnedCut = 1 << 10

// InputSizes learns, from the replies of the clients that share it (a
// process's embed jobs' and its queries'), how long a text the server
// takes: the shortest text it refused alone as input (RefusedInput), and
// the longest it accepted shorter than that. A client with
// Config.CutInputs cuts its texts to Limit before sending them, so that a
// query longer than a small model's context (512 tokens: llama.cpp's
// default batch, TEI's BERT models) is embedded by its start in one
// request, rather than refused: enrich's short budget has no room for a
// second request, and every long message was answered lexically. Safe
// for concurrent use; the zero value learns from nothing yet.
type InputSizes struct {
	mu       sync.Mutex
	refused  int // bytes of the shortest text refused alone as input; 0: none
	accepted int // bytes of the longest text accepted shorter than refused
}

// NewInputSizes returns an InputSizes that has learned nothing.
func NewInputSizes() *InputSizes { return &InputSizes{} }

// Limit is the length in bytes a text is cut to before it is sent, 0
// while the server has refused no text for its length: the longest text
// it accepted shorter than the shortest it refused, or half that one
// when it accepted none, and never under minLearnedCut.
func (s *InputSizes) Limit() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == 0 {
		return 0
	}
	return max(s.accepted, s.refused/2, minLearnedCut)
}

// noteAccepted learns that a text of n bytes was embedded. One at least
// as long as the shortest refused says length is not what the server
// refused (a model of fewer tokens to the byte, or a text refused for
// what it held): the refusal is forgotten.
func (s *InputSizes) noteAccepted(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused != 0 && n >= s.refused {
		s.refused = 0
	}
	s.accepted = max(s.accepted, n)
}

// noteRefused learns that a text of n bytes, sent alone, was refused as
// input; one shorter than twice minLearnedCut, or no longer than a text
// the server took, was refused for what it holds, and is not learnt from.
func (s *InputSizes) noteRefused(n int) {
	if s == nil || n < 2*minLearnedCut {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= s.accepted {
		return
	}
	if s.refused == 0 || n < s.refused {
		s.refused = n
	}
}

// cutTo is text cut to at most n bytes, at a rune boundary; text itself
// when n is 0 or it is not longer.
func cutTo(text string, n int) string {
	if n <= 0 || len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}
