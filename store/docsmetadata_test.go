package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// Document metadata that JSON allows but Postgres jsonb refuses was a 500
// ("memory store unavailable", SQLSTATE 22P02) from docs.put: a lone UTF-16
// surrogate escape (what JSON.stringify writes for a string cut inside an
// emoji) is stored as U+FFFD, as in every other request and in a turn's
// metadata; a number whose exponent jsonb cannot hold is refused as
// invalid, naming it, as a turn's metadata is.
func TestPutDocumentMetadataJSONBRefuses(t *testing.T) {
	ctx, s := setup(t)
	for doc, meta := range map[string]string{
		"high": `{"k":"a\ud800b"}`,
		"low":  `{"k":"\udc00\ud800"}`,
		"key":  `{"\ud83c":1}`,
	} {
		put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: doc, Content: "x " + doc, Metadata: []byte(meta)})
	}
	docs, _, err := s.ListDocuments(ctx, alice, "c", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"high": "{\"k\": \"a\ufffdb\"}", "low": "{\"k\": \"\ufffd\ufffd\"}", "key": "{\"\ufffd\": 1}"}
	for _, d := range docs {
		if string(d.Metadata) != want[d.DocID] {
			t.Errorf("%s: metadata %s, want %s", d.DocID, d.Metadata, want[d.DocID])
		}
	}
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want %d", len(docs), len(want))
	}
	// A pair stays the character it encodes; numbers keep their literal.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "pair", Content: "pair",
		Metadata: []byte(`{"k":"\ud83d\ude00","n":12345678901234567890,"<":"&"}`)})
	docs, _, err = s.ListDocuments(ctx, alice, "c", "low", 10) // doc ids after "low": "pair"
	if err != nil || len(docs) != 1 || string(docs[0].Metadata) != `{"<": "&", "k": "😀", "n": 12345678901234567890}` {
		t.Errorf("pair: %+v %v", docs, err)
	}
	for _, lit := range []string{"1e-99999", "1e999999", "1e400"} {
		_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "n", Content: "n",
			Metadata: []byte(`{"k":` + lit + `}`)})
		if !errors.Is(err, store.ErrInvalidDocument) || !strings.Contains(err.Error(), lit) {
			t.Errorf("metadata number %s: %v, want an invalid document naming it", lit, err)
		}
	}
}

// TestPutDocumentMetadataTrailingData: metadata that is an object followed
// by more (a closing bracket too many) is no JSON object, as before the
// metadata was decoded with a json.Decoder, whose More is false before a
// '}' or a ']' and so let `{"a":1}}` through, stored as {"a": 1}.
func TestPutDocumentMetadataTrailingData(t *testing.T) {
	ctx, s := setup(t)
	for _, meta := range []string{`{"a":1}}`, `{"a":1}]`, `{"a":1} {}`, `{"a":1} x`} {
		_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "t", Content: "t", Metadata: []byte(meta)})
		if !errors.Is(err, store.ErrInvalidDocument) {
			t.Errorf("metadata %s: %v, want an invalid document", meta, err)
		}
	}
	// White space after the object is fine.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "ws", Content: "ws", Metadata: []byte("{\"a\":1} \n")})
}
