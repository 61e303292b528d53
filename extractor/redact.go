package extractor

import "github.com/memoryd/memoryd/redact"

// RedactResult redacts every fact value, fact change value and context
// question and answer of r (see [redact.Text] and [redact.Fact]), dropping facts
// and added or removed items left empty, and facts and changes whose key
// holds a secret (a model may put one there as well), and returns the redacted result and
// the kinds of the spans it replaced. A delete is kept whatever its value
// held (the key is still no longer true), with its value emptied when
// nothing but markers was left. r is not modified.
func RedactResult(r Result) (Result, []redact.Kind) {
	var kinds []redact.Kind
	out := r
	if r.Facts != nil {
		out.Facts = make(map[string]string, len(r.Facts))
		for k, v := range r.Facts {
			if ks := secretKey(k); ks != nil {
				kinds = append(kinds, ks...)
				continue
			}
			red, ks, ok := redact.Fact(k, v)
			kinds = append(kinds, ks...)
			if ok {
				out.Facts[k] = red
			}
		}
	}
	if r.Changes != nil {
		out.Changes = make([]FactChange, 0, len(r.Changes))
		for _, c := range r.Changes {
			if ks := secretKey(c.Key); ks != nil {
				kinds = append(kinds, ks...)
				continue
			}
			red, ks, ok := redact.Fact(c.Key, c.Value)
			kinds = append(kinds, ks...)
			switch {
			case ok:
				c.Value = red
			case c.Op == OpDelete:
				c.Value = ""
			default:
				continue
			}
			out.Changes = append(out.Changes, c)
		}
	}
	if r.Context != nil {
		out.Context = make([]QA, len(r.Context))
		for i, qa := range r.Context {
			q, kq := redact.Text(qa.Q)
			a, ka := redact.Text(qa.A)
			kinds = append(append(kinds, kq...), ka...)
			out.Context[i] = QA{Q: q, A: a}
		}
	}
	return out, kinds
}

// secretKey is the kinds of the secrets in a fact key, nil when it holds
// none: such a fact is dropped whole, since a key with a marker in it
// names nothing.
func secretKey(key string) []redact.Kind {
	if red, kinds := redact.Text(key); red != key {
		return kinds
	}
	return nil
}
