package store

import (
	"bytes"
	"errors"
	"fmt"
)

// termCounts decodes tsvectors into TermCounts: for each query lexeme, its
// positions in the question (weight A) and in the answer (any other weight).
// It is reused across candidates so that reading them allocates nothing.
type termCounts struct {
	lex []byte // an escaped lexeme, unescaped
}

// read parses the text form of a tsvector ('lexeme':1A,5B 'other':3 …, with
// ' and \ doubled inside lexemes; weight D is not written) and counts the
// positions of each of terms into counts (len(terms) long). Lexemes that
// are not terms are skipped without reading their positions.
func (tc *termCounts) read(v []byte, terms []string, counts []TermCount) error {
	clear(counts)
	i := 0
	for i < len(v) {
		if v[i] == ' ' {
			i++
			continue
		}
		if v[i] != '\'' {
			return fmt.Errorf("tsvector: want a quote at %d", i)
		}
		i++
		end := bytes.IndexByte(v[i:], '\'')
		if end < 0 {
			return errors.New("tsvector: unterminated lexeme")
		}
		lex := v[i : i+end]
		if (i+end+1 < len(v) && v[i+end+1] == '\'') || bytes.IndexByte(lex, '\\') >= 0 {
			// Escapes: unescape into tc.lex.
			tc.lex = tc.lex[:0]
			for {
				if i >= len(v) {
					return errors.New("tsvector: unterminated lexeme")
				}
				ch := v[i]
				if (ch == '\'' || ch == '\\') && i+1 < len(v) && v[i+1] == ch {
					tc.lex = append(tc.lex, ch)
					i += 2
					continue
				}
				if ch == '\'' {
					break
				}
				tc.lex = append(tc.lex, ch)
				i++
			}
			lex = tc.lex
		} else {
			i += end
		}
		i++ // the closing quote
		var n *TermCount
		for t, term := range terms {
			if string(lex) == term { // compared, not converted: no allocation
				n = &counts[t]
				n.Present = true
				break
			}
		}
		if i >= len(v) || v[i] != ':' {
			continue // a lexeme without positions
		}
		if n == nil {
			// Not a query lexeme: positions hold neither spaces nor quotes.
			if sp := bytes.IndexByte(v[i:], ' '); sp >= 0 {
				i += sp
			} else {
				i = len(v)
			}
			continue
		}
		i++
		// Positions: digits, then the weight letter (none for D), comma-separated.
		for {
			for i < len(v) && v[i] >= '0' && v[i] <= '9' {
				i++
			}
			w := byte('D')
			if i < len(v) && v[i] >= 'A' && v[i] <= 'C' {
				w = v[i]
				i++
			}
			if w == 'A' {
				n.Question++
			} else {
				n.Answer++
			}
			if i >= len(v) || v[i] != ',' {
				break
			}
			i++
		}
		if i < len(v) && v[i] != ' ' {
			return fmt.Errorf("tsvector: unexpected %q at %d", v[i], i)
		}
	}
	return nil
}
