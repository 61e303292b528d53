package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Knowledge bases (issue 19, migrations/023): collections of documents, cut
// into chunks by the caller (package chunker, which store does not import)
// and searched with the same lexical statistics as context items. Ranking
// is the caller's (package ranking); SearchChunks reads the candidates.

// Bounds on what a document put may hold.
const (
	// MaxNameBytes bounds a collection or shared scope name.
	MaxNameBytes = 64
	// MaxDocIDBytes bounds a document id and its source name.
	MaxDocIDBytes = 512
	// MaxMetadataBytes bounds a document's metadata (a JSON object).
	MaxMetadataBytes = 4096
)

// Document statuses.
const (
	// DocPending: the content is stored, its chunks (of this content) are
	// not written yet; a job will write them.
	DocPending = "pending"
	// DocReady: the chunks of the current content are searchable.
	DocReady = "ready"
)

// ErrNoCollection is returned when a named collection does not exist or
// the reader may not read it (the two are not told apart, so that a reader
// learns nothing of collections it may not read).
var ErrNoCollection = errors.New("no such collection")

// NoCollectionError is ErrNoCollection for a collection named in a request,
// naming it (errors.Is(err, ErrNoCollection) holds).
type NoCollectionError struct{ Name string }

func (e *NoCollectionError) Error() string {
	return fmt.Sprintf("collection %q: %v", e.Name, ErrNoCollection)
}

func (e *NoCollectionError) Unwrap() error { return ErrNoCollection }

// DocsCapError is a put refused because the documents would go over their
// cap (DocumentPut.MaxTotalBytes): nothing was written.
type DocsCapError struct {
	// Cap is the cap, Size the document's content size, and Total what
	// all the documents' content would take with it (its old content
	// replaced).
	Cap, Size, Total int64
}

func (e *DocsCapError) Error() string {
	return fmt.Sprintf("documents cap: this %d byte document would bring the documents to %d bytes, over their cap of %d bytes",
		e.Size, e.Total, e.Cap)
}

// Owner is who a collection belongs to, and who reads: exactly one of User
// (a user's private collections) and Shared (a shared scope's collections,
// which users read only through a grant, see GrantReader) is set.
type Owner struct {
	User   string
	Shared string
}

func (o Owner) kind() (string, string, error) {
	switch {
	case o.User != "" && o.Shared == "":
		return "user", o.User, nil
	case o.Shared != "" && o.User == "":
		if err := ValidName(o.Shared); err != nil {
			return "", "", fmt.Errorf("shared scope: %w", err)
		}
		return "shared", o.Shared, nil
	default:
		return "", "", errors.New("owner must be exactly one of a user and a shared scope")
	}
}

// ValidName checks a collection or shared scope name: 1 to MaxNameBytes of
// ASCII letters, digits, '_' and '-', so that "scope/name" refers to a
// shared collection without ambiguity and a scope's name is its subject
// token.
func ValidName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return fmt.Errorf("name %q is not 1 to %d bytes", name, MaxNameBytes)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("name %q holds %q: only letters, digits, '_' and '-' are allowed", name, r)
		}
	}
	return nil
}

// Collection is a collection's settings.
type Collection struct {
	ID    int64
	Owner Owner
	Name  string
	// ChunkTokens and OverlapTokens are how its documents are cut (chunker
	// tokens), fixed when the collection is created.
	ChunkTokens, OverlapTokens int
	// TSConfig is the text search configuration its chunks are indexed
	// with.
	TSConfig string
}

// Ref is how a reader names the collection: its name when it is the
// reader's own, "scope/name" when it is a shared scope's read by a user.
func (c Collection) Ref(reader Owner) string {
	if c.Owner.Shared != "" && reader.Shared != c.Owner.Shared {
		return c.Owner.Shared + "/" + c.Name
	}
	return c.Name
}

// ChunkText is one chunk of a document, as the chunker cut it.
type ChunkText struct {
	HeadingPath []string
	Text        string
	// Start and End are the chunk's byte offsets in the document.
	Start, End int
}

// Chunker cuts a document's content under its collection's settings;
// source is the document's source (its file name or URL), which may say
// how it is written (a ".go" file is code).
type Chunker func(c Collection, source, content string) ([]ChunkText, error)

// DocumentPut is a document to store.
type DocumentPut struct {
	Owner      Owner
	Collection string
	// ChunkTokens and OverlapTokens set a collection's chunking when the put
	// creates it (0: the chunker's defaults, 200 and 30; an overlap over
	// half the chunk is cut to half). After, 0 or the collection's own
	// (cut so) takes the collection's; another is refused
	// (ErrInvalidDocument), naming both.
	ChunkTokens, OverlapTokens int
	// DocID is the document's id in the collection; Source when empty.
	DocID  string
	Source string
	// Content is the document's text (UTF-8, no NUL).
	Content string
	// Metadata is a JSON object of at most MaxMetadataBytes, or empty.
	Metadata json.RawMessage
	// Chunking names how Chunk (or the index job) cuts this document
	// (chunker.Chunking), kept with it: a put of the content the
	// document holds cuts it again when its chunking differs (an older
	// release cut it, or it was put under a name that cut it as another
	// language), where it writes nothing otherwise. Empty: not compared
	// (the document is unchanged by its content alone) and kept empty.
	Chunking string
	// Chunk, when set, cuts the content now, in the put's transaction: the
	// document is ready when PutDocument returns. When nil the document is
	// stored pending and IndexDocument writes its chunks later (call
	// PutDocument on the Store InTx hands out to enqueue that job in the
	// same transaction).
	Chunk Chunker
	// MaxTotalBytes, when over 0, caps the content size of all the
	// documents (every collection, every owner; their chunks and indexes
	// are not counted): a put that would bring it over is refused with a
	// *DocsCapError and writes nothing. A put of unchanged content, or one
	// that shrinks a document, is never refused. Capped puts are
	// serialised by a lock, so that two of them cannot both take the last
	// room.
	MaxTotalBytes int64
}

// PutResult is what PutDocument did.
type PutResult struct {
	Collection Collection
	DocID      string
	// Hash is the content's SHA-256, hex.
	Hash string
	// Unchanged: the document already had this content; nothing was
	// written (metadata included).
	Unchanged bool
	// Status is the document's status after the put (DocReady or
	// DocPending); Chunks its chunk count when ready.
	Status string
	Chunks int
}

// cutLabel is what a document's row keeps in its chunking column: the
// chunking (chunker.Chunking) and the start of the hash of the content it
// cut, "1 python@4d3fa84b5a4b" ("" for a put naming no chunking). A serve
// of the release before migration 072 puts new content over a document
// rewriting its content and hash but not the column, which it does not
// know: the label then names another content, and this release's next
// put of that content cuts it again rather than keep that release's
// chunks as its own.
func cutLabel(chunking, hash string) string {
	if chunking == "" {
		return ""
	}
	return chunking + "@" + hash[:12]
}

// pendingLabel is the chunking column of a document put pending (its
// index job cuts it): the chunking with no hash, which no put's cutLabel
// matches until this release's IndexDocument adds the content's. A
// worker of the release before migration 072 that runs the job (during
// a rolling upgrade, or after rolling back) cuts it its own way and
// leaves the column: this release's next put of the content cuts it
// again rather than keep that release's chunks as its own.
func pendingLabel(chunking string) string {
	if chunking == "" {
		return ""
	}
	return chunking + "@"
}

// DocumentHash is the hash PutDocument keeps of a document's content.
func DocumentHash(content string) string {
	h := sha256.Sum256([]byte(content))
	return hex.EncodeToString(h[:])
}

// ErrInvalidDocument is matched (errors.Is) by the errors of a put whose
// document is at fault (its id, content, metadata, or a chunker's refusal
// of its text): the caller's to mend, not the store's.
var ErrInvalidDocument = errors.New("invalid document")

// ErrNoText refuses a document of headings and front matter only, of
// which the chunker cuts no chunk: stored, none of its words would ever
// be found. PutDocument refuses one it chunks (as InvalidDocument); the
// caller of a put it does not chunk (a document chunked by its job)
// refuses one itself.
var ErrNoText = errors.New("document content has no text outside its headings and front matter: nothing to search (a chunk is the text under a heading)")

// InvalidDocument marks err, a refusal of a document (its message
// unchanged), as matching ErrInvalidDocument.
func InvalidDocument(err error) error { return invalidDocument{err} }

type invalidDocument struct{ error }

func (e invalidDocument) Unwrap() error        { return e.error }
func (e invalidDocument) Is(target error) bool { return target == ErrInvalidDocument }

func (p *DocumentPut) validate() error {
	if _, _, err := p.Owner.kind(); err != nil {
		return err
	}
	if err := ValidName(p.Collection); err != nil {
		return fmt.Errorf("collection: %w", err)
	}
	if p.DocID == "" {
		p.DocID = p.Source
	}
	if p.Source == "" {
		p.Source = p.DocID
	}
	if p.DocID == "" {
		return errors.New("document id or source is required")
	}
	for _, s := range []string{p.DocID, p.Source} {
		if len(s) > MaxDocIDBytes || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return fmt.Errorf("document id and source must be valid UTF-8 without NUL, at most %d bytes", MaxDocIDBytes)
		}
	}
	if !utf8.ValidString(p.Content) {
		return errors.New("document content is not UTF-8 text")
	}
	if i := strings.IndexByte(p.Content, 0); i >= 0 {
		// Valid UTF-8, but Postgres text cannot hold it (and a binary file
		// is the usual cause): said so, not "not UTF-8".
		return fmt.Errorf("document content holds a NUL byte (at byte %d): not text Postgres can store", i)
	}
	if strings.TrimSpace(p.Content) == "" {
		// Stored, it would have no chunk: nothing of it is ever found.
		return errors.New("document content is empty or white space only: nothing to search")
	}
	if len(p.Metadata) > MaxMetadataBytes {
		return fmt.Errorf("document metadata is %d bytes, over %d", len(p.Metadata), MaxMetadataBytes)
	}
	if len(p.Metadata) == 0 {
		p.Metadata = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(p.Metadata))
	dec.UseNumber() // numbers keep their literal (jsonb's numeric is exact)
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return errors.New("document metadata must be a JSON object")
	}
	// Nothing but white space after it: More is false before a '}' or a
	// ']', so `{"a":1}}` passed it.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("document metadata must be a JSON object")
	}
	if holdsNUL(obj) {
		// jsonb cannot hold \u0000: the insert would fail as a store error.
		return errors.New("document metadata contains a NUL character")
	}
	if err := metadataNumbers(obj); err != nil {
		return err
	}
	// Written as decoded, not as sent: a lone UTF-16 surrogate escape
	// ("\ud800", what JSON.stringify writes for a string cut inside an
	// emoji), which jsonb refuses (the put was a 500), becomes U+FFFD, as
	// in every other request and a turn's metadata. jsonb keeps no
	// formatting, key order or repeated key of what was sent anyway.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return errors.New("document metadata must be a JSON object")
	}
	p.Metadata = json.RawMessage(bytes.TrimSpace(buf.Bytes()))
	return nil
}

// Exponents a metadata number may have: a double's, as a turn's metadata
// (package events), so that a short literal can neither fail the insert
// (jsonb's numeric holds at most 16383 digits after the point) nor grow
// into a huge one.
const (
	maxMetadataExponent = 308
	minMetadataExponent = -324
)

// metadataNumbers refuses a number of decoded metadata whose exponent is
// out of range, naming it.
func metadataNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := metadataNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := metadataNumbers(e); err != nil {
				return err
			}
		}
	case json.Number:
		lit := string(v)
		i := strings.IndexAny(lit, "eE")
		if i < 0 {
			return nil // digits within the 4096 bytes of metadata
		}
		e := strings.TrimPrefix(lit[i+1:], "+")
		// Past 4 significant digits it is out of range whatever they are
		// (and Atoi cannot overflow).
		exp, _ := strconv.Atoi(e)
		if len(strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")) > 4 || exp < minMetadataExponent || exp > maxMetadataExponent {
			return fmt.Errorf("document metadata number %.40s has an exponent out of range (%d to %d)", lit, minMetadataExponent, maxMetadataExponent)
		}
	}
	return nil
}

// holdsNUL reports whether a decoded JSON value has a NUL in a string or
// an object key.
func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || holdsNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsNUL(e) {
				return true
			}
		}
	}
	return false
}

// collection returns the owner's collection name, creating it with the
// given chunking (0: defaults) when create is set. A user's collection
// takes the user's text search configuration (SetLanguage).
func (s *Store) collection(ctx context.Context, o Owner, name string, create bool, tokens, overlap int) (Collection, error) {
	kind, owner, err := o.kind()
	if err != nil {
		return Collection{}, err
	}
	if tokens == 0 {
		tokens = 200
	}
	if overlap == 0 {
		overlap = min(30, tokens/2)
	}
	overlap = min(overlap, tokens/2) // more than half a chunk is cut to half
	c := Collection{Owner: o, Name: name}
	// When creating (a put), the row is locked until the transaction ends
	// (FOR KEY SHARE, as the documents' foreign key takes it), so that a
	// deletion of the collection (a forget's, DeleteCollections) waits for
	// the put and deletes its document too, or has committed and the
	// collection is created anew: a deletion committed between the read
	// and the document's insert failed the put on the foreign key. A
	// second deletion in between is not looked for: collectionAttempts.
	lock := ""
	if create {
		lock = " FOR KEY SHARE"
	}
	for attempt := 1; ; attempt++ {
		if create {
			if _, err := s.db.Exec(ctx, `
				INSERT INTO collections (owner_kind, owner, name, chunk_tokens, overlap_tokens, ts_config)
				VALUES ($1, $2, $3, $4, $5, CASE WHEN $1 = 'user'
					THEN coalesce((SELECT ts_config FROM user_languages WHERE user_id = $2), 'english') ELSE 'english' END)
				ON CONFLICT (owner_kind, owner, name) DO NOTHING`, kind, owner, name, tokens, max(overlap, 0)); err != nil {
				return Collection{}, fmt.Errorf("create collection: %w", err)
			}
		}
		err = s.db.QueryRow(ctx, `SELECT id, chunk_tokens, overlap_tokens, ts_config FROM collections
			WHERE owner_kind = $1 AND owner = $2 AND name = $3`+lock, kind, owner, name).
			Scan(&c.ID, &c.ChunkTokens, &c.OverlapTokens, &c.TSConfig)
		if errors.Is(err, pgx.ErrNoRows) && create {
			if attempt < collectionAttempts {
				continue // deleted since the insert found it
			}
			// Not ErrNoCollection, which callers answer as not found.
			return Collection{}, fmt.Errorf("collection %q deleted %d times while this put created it: send it again", name, attempt)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return Collection{}, &NoCollectionError{Name: name}
		}
		if err != nil {
			return Collection{}, fmt.Errorf("read collection: %w", err)
		}
		return c, nil
	}
}

// collectionAttempts bounds how often a put creates its collection again
// when it is deleted between the insert and the read (collection).
const collectionAttempts = 3

// PutDocument stores a document, creating its collection when missing. The
// same content as stored (by hash) is a no-op (PutResult.Unchanged) but
// for a pending document with p.Chunk set, which is chunked now. A put of
// new content sets put_at, the user's last put of the document that a
// forget and a restore read (DeleteDocumentsBefore, userWrittenSince);
// chunking does not, nor does a put of unchanged content, which writes
// nothing: a periodic sync's re-puts would each leave a row version,
// which the size's high water (SampleContextHighWater) counts against
// the documents' TOASTed content too. New
// content replaces the document's chunks in one transaction: a search sees
// the old chunks or the new ones, never a mix. A new chunk with the
// heading path and text of an old chunk of a ready document (at any
// index) keeps that chunk's vectors and refusals, under the new content's
// hash (keptChunkVectors): only the chunks the edit changed are embedded
// again. With p.Chunk nil the old chunks are deleted, with their vectors,
// and the document left pending (not searchable) until IndexDocument
// runs.
func (s *Store) PutDocument(ctx context.Context, p DocumentPut) (PutResult, error) {
	if err := p.validate(); err != nil {
		return PutResult{}, fmt.Errorf("put document: %w", InvalidDocument(err))
	}
	r := PutResult{DocID: p.DocID, Hash: DocumentHash(p.Content)}
	err := s.inTx(ctx, func(q *Store) error {
		c, err := q.collection(ctx, p.Owner, p.Collection, true, p.ChunkTokens, p.OverlapTokens)
		if err != nil {
			return err
		}
		if p.ChunkTokens != 0 && p.ChunkTokens != c.ChunkTokens {
			// Its documents are cut one way: taking the collection's size
			// without a word left the caller believing in its own.
			return InvalidDocument(fmt.Errorf(
				"collection %q cuts chunks of %d tokens, set when it was created: chunk_tokens %d differs (leave it out to use the collection's; to cut documents to another size, put them into a new collection)",
				p.Collection, c.ChunkTokens, p.ChunkTokens))
		}
		if p.OverlapTokens != 0 && min(p.OverlapTokens, c.ChunkTokens/2) != c.OverlapTokens {
			// Likewise: an overlap cut to half of the collection's chunk,
			// as it was when the collection was created, is its own.
			return InvalidDocument(fmt.Errorf(
				"collection %q overlaps its chunks by %d tokens, set when it was created: overlap_tokens %d differs (leave it out to use the collection's; to overlap documents otherwise, put them into a new collection)",
				p.Collection, c.OverlapTokens, p.OverlapTokens))
		}
		r.Collection = c
		var hash, status, chunking string
		var chunks int
		var oldSize int64
		err = q.db.QueryRow(ctx, `SELECT content_hash, status, chunks, size_bytes, chunking FROM documents
			WHERE collection_id = $1 AND doc_id = $2 FOR UPDATE`, c.ID, p.DocID).Scan(&hash, &status, &chunks, &oldSize, &chunking)
		// Chunks cut another way (an older release, another language's
		// name) are cut again: the same content wrote nothing, and the
		// document kept them until its content changed.
		// A pending document put again pending is compared with its
		// pending label: it is left as it is (its job enqueued again).
		sameCut := p.Chunking == "" || chunking == cutLabel(p.Chunking, r.Hash) ||
			status == DocPending && p.Chunk == nil && chunking == pendingLabel(p.Chunking)
		switch {
		case err == nil && hash == r.Hash && sameCut && (status != DocPending || p.Chunk == nil):
			// A pending document put again with its content is left as it
			// is, and the caller enqueues its chunking job again (the last
			// one may be lost); one the caller chunks now is written below.
			r.Unchanged, r.Status, r.Chunks = true, status, chunks
			return nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read document: %w", err)
		}
		// put_at is the last put of new content: a put cutting a ready
		// document's content again (chunks cut another way) is no new
		// write of the user's for a forget (see migration 066), as a put
		// of the content it holds writes nothing.
		recut := err == nil && hash == r.Hash && status != DocPending
		// New content over a ready document, whose old chunks' vectors
		// may serve new chunks cut alike (keptChunkVectors).
		replaces := err == nil && hash != r.Hash && status == DocReady
		if err := q.checkDocsCap(ctx, p.MaxTotalBytes, c.ID, p.DocID, int64(len(p.Content)), oldSize); err != nil {
			return err
		}
		var cut []ChunkText
		r.Status = DocPending
		label := pendingLabel(p.Chunking)
		if p.Chunk != nil {
			if cut, err = p.Chunk(c, p.Source, p.Content); err != nil {
				return fmt.Errorf("chunk document: %w", err)
			}
			if len(cut) == 0 {
				// Headings or front matter only: stored, nothing of it
				// would ever be found, and an ok would say otherwise.
				return InvalidDocument(ErrNoText)
			}
			r.Status, r.Chunks = DocReady, len(cut)
			label = cutLabel(p.Chunking, r.Hash)
		}
		if _, err := q.db.Exec(ctx, `
			INSERT INTO documents (collection_id, doc_id, source, content_hash, content, metadata, size_bytes, status, chunks, put_at, chunking)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), $10)
			ON CONFLICT (collection_id, doc_id) DO UPDATE SET source = excluded.source,
				content_hash = excluded.content_hash, content = excluded.content, metadata = excluded.metadata,
				size_bytes = excluded.size_bytes, status = excluded.status, chunks = excluded.chunks, updated_at = now(),
				put_at = CASE WHEN $11 THEN documents.put_at ELSE now() END, chunking = excluded.chunking`,
			c.ID, p.DocID, p.Source, r.Hash, p.Content, []byte(p.Metadata), len(p.Content), r.Status, r.Chunks, label, recut); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		// New content over a ready document: the vectors and refusals of
		// its old chunks that a new chunk has the heading path and text
		// of, read before writeChunks deletes them with the old chunks,
		// and saved again onto the new chunks below.
		var kept keptVectors
		if replaces && len(cut) > 0 {
			if kept, err = q.keptChunkVectors(ctx, c.ID, p.DocID, hash, cut); err != nil {
				return err
			}
		}
		if err := q.writeChunks(ctx, c, p.DocID, cut, recut); err != nil {
			return err
		}
		if err := q.carryChunkVectors(ctx, c.ID, p.DocID, r.Hash, kept); err != nil {
			return err
		}
		return q.chunksWritten(ctx, chunksRef(c.ID, p.DocID, r.Hash, len(cut)))
	})
	if err != nil {
		return PutResult{}, fmt.Errorf("put document: %w", err)
	}
	return r, nil
}

// checkDocsCap refuses a put of size bytes replacing oldSize bytes (0: a
// new document) when the documents' content would go over maxTotal (0: no
// cap). It takes a transaction lock first (per schema, as SetLanguage's),
// held until the put commits, so that concurrent capped puts are counted
// one after the other; a put that does not grow the total needs neither.
func (s *Store) checkDocsCap(ctx context.Context, maxTotal, collectionID int64, docID string, size, oldSize int64) error {
	if maxTotal <= 0 || size <= oldSize {
		return nil
	}
	// The sum is a statement of its own, after the lock: its snapshot
	// (read committed) then holds every put that held the lock before.
	if _, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memoryd.docs_cap.' || current_schema(), 0))`); err != nil {
		return fmt.Errorf("documents cap lock: %w", err)
	}
	// The document's own row is left out of the sum, as it stands now: a
	// concurrent first put of the same document may have committed it
	// since this put read oldSize, and this put replaces it.
	var total int64
	if err := s.db.QueryRow(ctx, `SELECT coalesce(sum(size_bytes), 0)::bigint FROM documents
		WHERE NOT (collection_id = $1 AND doc_id = $2)`, collectionID, docID).Scan(&total); err != nil {
		return fmt.Errorf("documents size: %w", err)
	}
	if total += size; total > maxTotal {
		return &DocsCapError{Cap: maxTotal, Size: size, Total: total}
	}
	return nil
}

// headingSep joins a heading path for the insert; it cannot occur in a
// heading (writeChunks replaces it).
const headingSep = "\x1f"

// chunkColumns are the columns of cut as writeChunks inserts them: the
// heading paths joined by headingSep (replaced in a heading), the texts
// and the byte offsets.
func chunkColumns(cut []ChunkText) (paths, texts []string, starts, ends []int32) {
	paths, texts = make([]string, len(cut)), make([]string, len(cut))
	starts, ends = make([]int32, len(cut)), make([]int32, len(cut))
	for i, ch := range cut {
		hs := make([]string, len(ch.HeadingPath))
		for j, h := range ch.HeadingPath {
			hs[j] = strings.ReplaceAll(h, headingSep, " ")
		}
		paths[i], texts[i], starts[i], ends[i] = strings.Join(hs, headingSep), ch.Text, int32(ch.Start), int32(ch.End)
	}
	return paths, texts, starts, ends
}

// writeChunks replaces a document's chunks by cut (none: deleted only).
// With recut (the content the document holds, cut again), a chunk whose
// index, heading path and text the new cut has too is kept, its other
// columns rewritten: its vectors and refusals (of that content, and of
// that text: chunkSum) stay. Before, a re-cut deleted them all, and every
// chunk of every document an older chunking cut was embedded again, the
// identical ones too, searched without vectors meanwhile.
func (s *Store) writeChunks(ctx context.Context, c Collection, docID string, cut []ChunkText, recut bool) error {
	paths, texts, starts, ends := chunkColumns(cut)
	if !recut || len(cut) == 0 {
		if _, err := s.db.Exec(ctx, `DELETE FROM doc_chunks WHERE collection_id = $1 AND doc_id = $2`, c.ID, docID); err != nil {
			return fmt.Errorf("delete chunks: %w", err)
		}
	} else if _, err := s.db.Exec(ctx, `
		DELETE FROM doc_chunks ch WHERE ch.collection_id = $1 AND ch.doc_id = $2
		  AND NOT EXISTS (SELECT FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(h, t, i)
			WHERE u.i - 1 = ch.chunk_index AND u.t = ch.text
			  AND (CASE WHEN u.h = '' THEN '{}'::text[] ELSE string_to_array(u.h, E'\x1f') END) = ch.heading_path)`,
		c.ID, docID, paths, texts); err != nil {
		return fmt.Errorf("delete chunks cut otherwise: %w", err)
	}
	if len(cut) == 0 {
		return nil
	}
	// One statement for all the chunks: the arrays are unnested in order.
	// Each field is parsed once, for both the search vector and its length
	// (migration 026): the length counts the text's own words, the vector
	// adds the parts of its camelCase names (061).
	if _, err := s.db.Exec(ctx, `
		INSERT INTO doc_chunks (collection_id, doc_id, chunk_index, heading_path, heading, text, byte_start, byte_end, ts_config,
			search, heading_len, text_len)
		SELECT $1, $2, (u.i - 1)::int, p.path, p.heading, u.t, u.s, u.e, $7,
			setweight(v.h || memoryd_camel_tsvector($7, p.heading), 'A') || setweight(v.t || memoryd_camel_tsvector($7, u.t), 'B'), length(v.h), length(v.t)
		FROM unnest($3::text[], $4::text[], $5::int[], $6::int[]) WITH ORDINALITY AS u(h, t, s, e, i),
		LATERAL (SELECT CASE WHEN u.h = '' THEN '{}'::text[] ELSE string_to_array(u.h, E'\x1f') END AS path) p0,
		LATERAL (SELECT p0.path, array_to_string(p0.path, ' > ') AS heading) p,
		LATERAL (SELECT memoryd_tsvector_base($7, p.heading) AS h, memoryd_tsvector_base($7, u.t) AS t) v
		ON CONFLICT (collection_id, doc_id, chunk_index) DO UPDATE SET heading = excluded.heading, byte_start = excluded.byte_start,
			byte_end = excluded.byte_end, ts_config = excluded.ts_config, search = excluded.search,
			heading_len = excluded.heading_len, text_len = excluded.text_len`,
		c.ID, docID, paths, texts, starts, ends, c.TSConfig); err != nil {
		return fmt.Errorf("write chunks: %w", err)
	}
	return nil
}

// IndexDocument writes the chunks of a pending document, as the job
// PutDocument's caller enqueued does: it cuts the content with chunk and
// marks the document ready, in one transaction. It does nothing and
// returns false when the document is gone or its content's hash is no
// longer hash (the job is stale: a later put replaced the content and
// enqueued its own job), or when it is already ready.
func (s *Store) IndexDocument(ctx context.Context, collectionID int64, docID, hash string, chunk Chunker) (bool, error) {
	done := false
	err := s.inTx(ctx, func(q *Store) error {
		var c Collection
		var kind, owner, source, content, cur, status string
		err := q.db.QueryRow(ctx, `SELECT c.owner_kind, c.owner, c.name, c.chunk_tokens, c.overlap_tokens, c.ts_config,
				d.source, d.content, d.content_hash, d.status
			FROM documents d JOIN collections c ON c.id = d.collection_id
			WHERE d.collection_id = $1 AND d.doc_id = $2 FOR UPDATE OF d`, collectionID, docID).
			Scan(&kind, &owner, &c.Name, &c.ChunkTokens, &c.OverlapTokens, &c.TSConfig, &source, &content, &cur, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read document: %w", err)
		}
		if cur != hash || status == DocReady {
			return nil
		}
		c.ID = collectionID
		if kind == "user" {
			c.Owner.User = owner
		} else {
			c.Owner.Shared = owner
		}
		cut, err := chunk(c, source, content)
		if err != nil {
			return fmt.Errorf("chunk document: %w", err)
		}
		if err := q.writeChunks(ctx, c, docID, cut, false); err != nil {
			return err
		}
		// The put's pending label (pendingLabel) takes the hash of the
		// content cut; a label of another form is left.
		if _, err := q.db.Exec(ctx, `UPDATE documents SET status = 'ready', chunks = $3, updated_at = now(),
				chunking = CASE WHEN chunking LIKE '%@' THEN chunking || left(content_hash, 12) ELSE chunking END
			WHERE collection_id = $1 AND doc_id = $2`, collectionID, docID, len(cut)); err != nil {
			return fmt.Errorf("mark document ready: %w", err)
		}
		done = true
		return q.chunksWritten(ctx, chunksRef(collectionID, docID, hash, len(cut)))
	})
	if err != nil {
		return false, fmt.Errorf("index document: %w", err)
	}
	return done, nil
}

// DeleteDocument deletes a document and its chunks, and the River jobs of
// jobs's shapes with a CollectionField and a DocField that name it (in any
// state); false when there was no such document.
func (s *Store) DeleteDocument(ctx context.Context, o Owner, collection, docID string, jobs ...RiverJobs) (bool, error) {
	c, err := s.collection(ctx, o, collection, false, 0, 0)
	if errors.Is(err, ErrNoCollection) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete document: %w", err)
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM documents WHERE collection_id = $1 AND doc_id = $2`, c.ID, docID)
	if err != nil {
		return false, fmt.Errorf("delete document: %w", err)
	}
	// After the document: deleting it waited for a transaction holding it
	// (a put, a chunking job) to commit, and the jobs that one inserted go
	// too. Their arguments hold the document's id and its content's hash,
	// which outlived the document for the jobs' retention.
	if err := s.deleteJobsWhere(ctx, jobs, docJob, docJobCond, []int64{c.ID}, []string{docID}); err != nil {
		return false, fmt.Errorf("delete document: jobs: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// DocumentInfo describes a stored document (not its content).
type DocumentInfo struct {
	DocID, Source, Hash string
	Metadata            json.RawMessage
	Size                int64
	Status              string
	Chunks              int
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// ListDocuments returns a collection's documents in doc id order, at most
// limit of them after the id after ("" from the start), and the id to pass
// as after for the next page ("" when this is the last).
func (s *Store) ListDocuments(ctx context.Context, o Owner, collection, after string, limit int) ([]DocumentInfo, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("list documents: limit %d is under 1", limit)
	}
	c, err := s.collection(ctx, o, collection, false, 0, 0)
	if err != nil {
		return nil, "", fmt.Errorf("list documents: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT doc_id, source, content_hash, metadata, size_bytes, status, chunks, created_at, updated_at
		FROM documents WHERE collection_id = $1 AND doc_id > $2 ORDER BY doc_id LIMIT $3`, c.ID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list documents: %w", err)
	}
	docs := []DocumentInfo{}
	var d DocumentInfo
	_, err = pgx.ForEachRow(rows, []any{&d.DocID, &d.Source, &d.Hash, &d.Metadata, &d.Size, &d.Status, &d.Chunks, &d.CreatedAt, &d.UpdatedAt}, func() error {
		d.Metadata = append(json.RawMessage(nil), d.Metadata...)
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list documents: %w", err)
	}
	next := ""
	if len(docs) > limit {
		docs = docs[:limit]
		next = docs[limit-1].DocID
	}
	return docs, next, nil
}

// DeleteCollections deletes every collection of the owner, with their
// documents and chunks, the River jobs of jobs's shapes with a
// CollectionField that name one of them (their arguments hold document ids
// and hashes; in any state), and the owner's read grants and default
// collections when it is a user; it returns how many documents went.
//
// The jobs go after the collections: deleting a collection waits for a
// transaction that holds one of its documents (a put, a chunking job) to
// commit, and the jobs that one inserted are then deleted too.
func (s *Store) DeleteCollections(ctx context.Context, o Owner, jobs ...RiverJobs) (int64, error) {
	kind, owner, err := o.kind()
	if err != nil {
		return 0, fmt.Errorf("delete collections: %w", err)
	}
	var n int64
	err = s.inTx(ctx, func(q *Store) error {
		const where = `owner_kind = $1 AND owner = $2`
		if kind == "user" {
			// The user's defaults after the collections' locks (as a
			// setting of them takes its collections first) and before
			// their delete, all in (user, collection) order, as a clear of
			// them (SetDefaultCollections) and the user's forget
			// (ForgetUser) take them: left to the cascade and a delete at
			// the end, those of shared collections went last, and each held
			// a default the other waited for.
			if err := q.lockCollectionsWhere(ctx, where, kind, owner); err != nil {
				return err
			}
			if err := q.deleteDefaultsOf(ctx, owner); err != nil {
				return err
			}
		}
		var err error
		if n, err = q.deleteCollectionsWhere(ctx, jobs, where, kind, owner); err != nil {
			return err
		}
		if kind == "user" {
			if _, err := q.db.Exec(ctx, `DELETE FROM collection_readers WHERE user_id = $1`, owner); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete collections: %w", err)
	}
	return n, nil
}

// ForgetCollections is DeleteDocumentsBefore in one transaction, for the
// user's forget made at the time at (its tombstone's ForgottenAt), right
// after the memory's transaction: it deletes the user's own documents
// last put at or before at (documents.put_at, created_at for a row of
// before migration 066), the collections of then left without one, and
// the reader grants made by then; what the user wrote after the forget
// stays, as when a start finishes the forget cut short. It returns the
// number of documents deleted.
//
// It took every collection and grant of the user (DeleteCollections): a
// docs.put or an operator's `docs grant` answered while the forget ran,
// after its memory's transaction and before this delete, was deleted
// here, a lost write, where the same forget cut short and finished at a
// start kept it (TestForgetKeepsADocumentPutDuringIt,
// TestForgetKeepsAGrantMadeDuringIt). Default collections chosen since
// stay too (those chosen before went with the memory's transaction,
// ForgetUser). One transaction, as DeleteCollections was: a forget redoes
// it whole when Postgres rolled it back (a deadlock).
func (s *Store) ForgetCollections(ctx context.Context, user string, at time.Time, jobs ...RiverJobs) (int64, error) {
	if user == "" || at.IsZero() {
		return 0, errors.New("forget collections: user and time are required")
	}
	var n int64
	err := s.inTx(ctx, func(q *Store) (err error) {
		var locked []int64
		if n, locked, err = q.deleteDocumentsBefore(ctx, user, at, 0, jobs); err != nil {
			return err
		}
		return q.deleteEmptiedBefore(ctx, user, at, locked, true, jobs)
	})
	if err != nil {
		return 0, fmt.Errorf("forget collections: %w", err)
	}
	return n, nil
}

// CollectionUsers returns the users owning collections created at or
// before the time t: a forget cut short finds its user among them by token
// (the forgets bucket keeps no user id).
func (s *Store) CollectionUsers(ctx context.Context, t time.Time) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT owner FROM collections WHERE owner_kind = 'user' AND created_at <= $1`, t)
	if err != nil {
		return nil, fmt.Errorf("collection users: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("collection users: %w", err)
	}
	return users, nil
}

// deleteBeforeBatch is how many documents DeleteDocumentsBefore deletes
// in one transaction: a user may hold gigabytes of documents (10 MB took
// 3.6 s to delete on 2 cores), and a start's budget must not be spent
// in a transaction that then rolls back, at every start.
const deleteBeforeBatch = 500

// deleteBeforeRounds bounds the rounds of deleteDocumentsBefore's locks:
// each finds collections of the user's that puts begun before the
// forget's time created meanwhile, a handful at most.
const deleteBeforeRounds = 20

// DeleteDocumentsBefore deletes what DeleteCollections deletes of user's,
// as far as it was there at the time t (a forget's, which its process did
// not live to finish): the documents last put at or before t (put_at; a
// row of before migration 066 has none and is read by created_at, the
// first put's; not updated_at, which chunking sets too), with their
// chunks and the River jobs of jobs's shapes that name them; then the
// collections created at or before t that hold no document any more
// (their jobs and the defaults naming them go with them), and the user's
// reader grants made at or before t. What was written after t stays: a
// document put after the forget, a collection created after it (with a
// kept collection's settings) and a grant made after it, and default
// collections chosen after it (those chosen before went with the memory's
// transaction, ForgetUser). A document put again after t, new content
// or the same, stays: read by created_at, it went, a put answered as
// stored during the forget (TestForgetCollectionsKeepsADocumentPutAgainAfterIt).
// Each transaction deletes only in the user's collections it locked
// first: a collection a put creates and commits after that lock stays,
// with its documents (deleteDocumentsBefore).
// The documents go in transactions of
// deleteBeforeBatch, so that what one call deleted stays deleted when a
// later batch fails (ctx ending): calling it again goes on. It returns the
// number of documents deleted.
func (s *Store) DeleteDocumentsBefore(ctx context.Context, user string, t time.Time, jobs ...RiverJobs) (int64, error) {
	if user == "" {
		return 0, errors.New("delete documents before: user is required")
	}
	size := deleteBeforeBatch
	if v, ok := ctx.Value(deleteBatchKey{}).(int); ok {
		size = v
	}
	var n int64
	for {
		var batch int64
		err := s.inTx(ctx, func(q *Store) (err error) {
			var locked []int64
			batch, locked, err = q.deleteDocumentsBefore(ctx, user, t, size, jobs)
			if err != nil || batch == int64(size) {
				return err
			}
			return q.deleteEmptiedBefore(ctx, user, t, locked, false, jobs)
		})
		if err != nil {
			return n, fmt.Errorf("delete documents before: %w", err)
		}
		n += batch
		if batch < int64(size) {
			return n, nil
		}
	}
}

// deleteBatchKey is a ctx key for tests: the batch size of
// DeleteDocumentsBefore.
type deleteBatchKey struct{}

// deleteDocumentsBefore deletes up to size (0: all) of the documents
// DeleteDocumentsBefore deletes, in their order, and their jobs, in q's
// transaction. It returns how many it deleted and the ids of the user's
// collections it locked, the only ones it and deleteEmptiedBefore after
// it touch.
func (q *Store) deleteDocumentsBefore(ctx context.Context, user string, t time.Time, size int, jobs []RiverJobs) (int64, []int64, error) {
	var limit any // LIMIT NULL: all
	if size > 0 {
		limit = size
	}
	// The collections first, the user's of t or before, locked against
	// puts and chunk vector saves (FOR UPDATE conflicts with the FOR KEY
	// SHARE each holds on its collection until it commits, see collection
	// and shareCollection): one that holds one commits before the
	// statements below take their snapshots, so a document it wrote after
	// t is seen, and its collection is not taken for empty and deleted
	// with it by the cascade; a later one waits for this transaction.
	// Locked in id order before any document, as a put takes its
	// collection before its document. Documents are deleted only in
	// collections locked first: deleting the documents of a collection a
	// put created and committed after the lock, and then locking it to
	// delete it emptied, waited for a put or save into it that held its
	// key share lock and waited for one of those documents: a deadlock
	// (40P01) that rolled this transaction back
	// (TestForgetOfDocumentsBesidePutIntoACollectionCreatedDuringIt). A
	// collection created after t (by a put after the forget) is not
	// locked either, so puts into it do not wait: a document in it is of
	// after t, but for one a put begun before t wrote into it once it was
	// created, which stays too.
	//
	// Then again, until a round locks none: a collection a put begun
	// before t created and committed after the lock before (while it
	// waited for a put into one of the user's collections) holds a
	// document put before t, answered before the forget, which must go
	// (TestForgetDeletesAPutBeforeItIntoACollectionCreatedDuringIt). It is
	// locked before any of its documents is deleted, so a put or save into
	// it, which touches only its own collection's rows, waits for nothing
	// this transaction holds: no cycle. The rounds end: a collection of t
	// or before comes only from a put begun before t, and one locked here
	// is not created again while this transaction holds it.
	var (
		locked = []int64{} // not nil: NOT id = ANY(NULL) is never true
		cols   []int64
		docs   []string
	)
	for round := 1; ; round++ {
		rows, err := q.db.Query(ctx, `SELECT id FROM collections WHERE owner_kind = 'user' AND owner = $1 AND created_at <= $2
			AND NOT id = ANY($3) ORDER BY id FOR UPDATE`, user, t, locked)
		if err != nil {
			return 0, nil, err
		}
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, nil, err
		}
		if len(fresh) == 0 {
			break
		}
		if round > deleteBeforeRounds {
			return 0, nil, fmt.Errorf("collections of the user's still created during the delete after %d rounds: run it again", deleteBeforeRounds)
		}
		locked = append(locked, fresh...)
		if limit != nil && len(docs) >= size {
			break // the batch is full: the next one goes on
		}
		var left any = limit
		if limit != nil {
			left = size - len(docs)
		}
		rows, err = q.db.Query(ctx, `DELETE FROM documents d WHERE (d.collection_id, d.doc_id) IN (
				SELECT d2.collection_id, d2.doc_id FROM documents d2
				WHERE d2.collection_id = ANY($1) AND coalesce(d2.put_at, d2.created_at) <= $2
				ORDER BY d2.collection_id, d2.doc_id LIMIT $3)
			RETURNING d.collection_id, d.doc_id`, fresh, t, left)
		if err != nil {
			return 0, nil, err
		}
		var col int64
		var doc string
		if _, err := pgx.ForEachRow(rows, []any{&col, &doc}, func() error {
			cols, docs = append(cols, col), append(docs, doc)
			return nil
		}); err != nil {
			return 0, nil, err
		}
	}
	// As DeleteDocument: a job naming other documents too (MoreField)
	// stays, and goes with its collection.
	if len(docs) > 0 {
		if err := q.deleteJobsWhere(ctx, jobs, docJob, docJobCond, cols, docs); err != nil {
			return 0, nil, err
		}
	}
	return int64(len(docs)), locked, nil
}

// deleteEmptiedBefore deletes, in q's transaction (which holds the locks
// of the collections locked, deleteDocumentsBefore), those of them of t
// or before left without a document, their jobs, and the user's reader
// grants of t or before. A collection of the user's not locked before is
// left: its lock, taken now after documents' deletes, could close a
// cycle with a put into it (see deleteDocumentsBefore).
// With keepDefaults (a forget's, ForgetCollections, right after its
// memory's transaction deleted the defaults chosen before it), a
// collection one of the user's default collections names stays: the user
// chose it since, and it went with the collection, answered ok
// (TestForgetKeepsADefaultCollectionChosenDuringIt).
func (q *Store) deleteEmptiedBefore(ctx context.Context, user string, t time.Time, locked []int64, keepDefaults bool, jobs []RiverJobs) error {
	if len(locked) > 0 {
		if _, err := q.deleteCollectionsWhere(ctx, jobs, `id = ANY($4) AND owner_kind = 'user' AND owner = $1 AND created_at <= $2
			AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.collection_id = collections.id)
			AND NOT ($3 AND EXISTS (SELECT 1 FROM doc_defaults dd WHERE dd.user_id = $1 AND dd.collection_id = collections.id))`,
			user, t, keepDefaults, locked); err != nil {
			return err
		}
	}
	// A statement of its own before the delete, whose snapshot then holds
	// every grant that held the lock before (see GrantReader).
	if err := q.lockGrants(ctx, user); err != nil {
		return err
	}
	_, err := q.db.Exec(ctx, `DELETE FROM collection_readers WHERE user_id = $1 AND granted_at <= $2`, user, t)
	return err
}

// lockCollectionsWhere locks the collections where holds (FOR UPDATE) in
// id order, as deleteDocumentsBefore and SetDefaultCollections lock
// theirs: a delete alone locks them in its plan's order (a user's by name,
// the unique index's), and a forget beside the finish of a forget cut
// short of the same user each held a collection the other waited for.
func (q *Store) lockCollectionsWhere(ctx context.Context, where string, args ...any) error {
	_, err := q.db.Exec(ctx, `SELECT 1 FROM collections WHERE `+where+` ORDER BY id FOR UPDATE`, args...)
	return err
}

// lockDefaultsWhere locks the default collections' rows where holds (an
// SQL condition on doc_defaults, with args) in (user, collection) order:
// every writer that deletes several of them takes them so, before it
// deletes them (a DELETE alone, or a cascade, goes in its plan's order,
// the table's or the collections' names'), and its collections' locks
// before these.
func (q *Store) lockDefaultsWhere(ctx context.Context, where string, args ...any) error {
	_, err := q.db.Exec(ctx, `SELECT 1 FROM doc_defaults WHERE `+where+` ORDER BY user_id, collection_id FOR UPDATE`, args...)
	return err
}

// deleteDefaultsOf deletes the user's default collections, locked in
// order first (lockDefaultsWhere).
func (q *Store) deleteDefaultsOf(ctx context.Context, user string) error {
	if err := q.lockDefaultsWhere(ctx, `user_id = $1`, user); err != nil {
		return err
	}
	_, err := q.db.Exec(ctx, `DELETE FROM doc_defaults WHERE user_id = $1`, user)
	return err
}

// deleteCollectionsWhere deletes the collections where (an SQL condition
// on collections, with args) holds, their documents and chunks (the
// cascade), and the River jobs of jobs's shapes with a CollectionField
// that name one of them, in any state. It returns how many documents went.
func (q *Store) deleteCollectionsWhere(ctx context.Context, jobs []RiverJobs, where string, args ...any) (int64, error) {
	if err := q.lockCollectionsWhere(ctx, where, args...); err != nil {
		return 0, err
	}
	// Their defaults too, which the cascade deletes in the delete's order.
	if err := q.lockDefaultsWhere(ctx, `collection_id IN (SELECT id FROM collections WHERE `+where+`)`, args...); err != nil {
		return 0, err
	}
	// The documents are counted by the delete's own statement, on its
	// snapshot: counted before the locks, a document a put the delete
	// waited for added went uncounted (the count a forget reports).
	var (
		ids  []int64
		docs int64
	)
	if err := q.db.QueryRow(ctx, `WITH gone AS (DELETE FROM collections WHERE `+where+` RETURNING id)
		SELECT coalesce(array_agg(id), '{}'), (SELECT count(*) FROM documents WHERE collection_id IN (SELECT id FROM gone)) FROM gone`,
		args...).Scan(&ids, &docs); err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		if err := q.deleteJobsWhere(ctx, jobs, func(j RiverJobs) bool { return j.Kind != "" && j.CollectionField != "" },
			func(j RiverJobs, arg func(any) string) string {
				return `(kind = ` + arg(j.Kind) + ` AND args->` + arg(j.CollectionField) + `::text IN (SELECT to_jsonb(id) FROM unnest($1::bigint[]) AS id))`
			}, ids); err != nil {
			return 0, err
		}
	}
	return docs, nil
}

// docJob tells the shapes of jobs that name a document (DeleteDocument,
// deleteDocumentsBefore delete them with it).
func docJob(j RiverJobs) bool { return j.Kind != "" && j.CollectionField != "" && j.DocField != "" }

// docJobCond selects the jobs of shape j naming one of the documents of
// $1 (collection ids) and $2 (document ids), but for those naming other
// documents too (MoreField), which go with their collection.
func docJobCond(j RiverJobs, arg func(any) string) string {
	more := arg(j.MoreField)
	return `(kind = ` + arg(j.Kind) + ` AND (args->` + arg(j.CollectionField) + `::text, args->>` + arg(j.DocField) + `::text) IN
		(SELECT to_jsonb(c), d FROM unnest($1::bigint[], $2::text[]) AS x(c, d)) AND (` + more + `::text = '' OR NOT args ? ` + more + `::text))`
}

// deleteJobsWhere deletes the River jobs of the shapes of jobs that use
// selects, of each the ones cond selects (an SQL condition on river_job,
// whose placeholders from $1 are base's; arg adds an argument and returns
// its placeholder), all locked in id order first, as a takeover locks the
// running jobs it ends (endRunning): deleted shape by shape, as each
// delete met them, a forget of documents held an index job of the user's
// and waited for a chunk embed job lying before it, which a takeover held
// while it waited for the index job (40P01,
// TestTakeOverBesideDeletesOfDocumentJobsOfTwoShapes,
// TestTakeOverBesideForgetOfDocumentJobsOutOfIDOrder).
func (q *Store) deleteJobsWhere(ctx context.Context, jobs []RiverJobs, use func(RiverJobs) bool, cond func(j RiverJobs, arg func(any) string) string, base ...any) error {
	args := slices.Clone(base)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var conds []string
	for _, j := range jobs {
		if use(j) {
			conds = append(conds, cond(j, arg))
		}
	}
	if len(conds) == 0 {
		return nil
	}
	where := strings.Join(conds, " OR ")
	if _, err := q.db.Exec(ctx, `SELECT FROM river_job WHERE `+where+` ORDER BY id FOR UPDATE`, args...); err != nil {
		return fmt.Errorf("lock jobs: %w", err)
	}
	if _, err := q.db.Exec(ctx, `DELETE FROM river_job WHERE `+where, args...); err != nil {
		return fmt.Errorf("delete jobs: %w", err)
	}
	return nil
}

// GrantReader lets user read the shared scope's collections from the user's
// own subjects; RevokeReader takes it back. Both report whether anything
// changed.
//
// The grant is made under the user's grants lock (lockGrants), which a
// forget's delete of the grants made by its time takes too, and is timed
// once written (clock_timestamp, not the transaction's start): one
// whose statement began before the forget and committed after that delete
// (it waited for another's insert of the same grant) kept its time from
// before the forget, which that delete, not seeing it, had left, and a
// finish of the forget at a start would then delete
// (TestForgetOrdersAGrantThatBeganBeforeIt). Now it commits before the
// delete reads the grants, or is timed after the delete committed.
func (s *Store) GrantReader(ctx context.Context, scope, user string) (bool, error) {
	if err := ValidName(scope); err != nil || user == "" {
		return false, fmt.Errorf("grant reader: scope and user are required: %v", err)
	}
	var granted bool
	err := s.inTx(ctx, func(q *Store) error {
		if err := q.lockGrants(ctx, user); err != nil {
			return err
		}
		tag, err := q.db.Exec(ctx, `INSERT INTO collection_readers (scope, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, scope, user)
		if err != nil {
			return err
		}
		granted = tag.RowsAffected() > 0
		// Timed now, once inserted: the insert's own values are taken
		// before it waits for another's insert of the grant (one that
		// takes no lock: a serve of an earlier release). A grant held
		// already is timed again too (it reports no change): left with
		// its time from before a forget running, the forget's delete took
		// the grant given again during it, which given after its reply
		// stays (TestForgetCollectionsKeepsAGrantMadeAgainAfterIt).
		_, err = q.db.Exec(ctx, `UPDATE collection_readers SET granted_at = clock_timestamp() WHERE scope = $1 AND user_id = $2`, scope, user)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("grant reader: %w", err)
	}
	return granted, nil
}

// lockGrants takes, until the transaction ends, the user's grants lock
// (an advisory lock per user and schema): a grant takes it before its
// insert, and a forget's delete of the grants made by its time
// (deleteEmptiedBefore) before that delete, last, after its collections'
// locks; a grant holds no other lock while it waits, so no cycle closes.
func (q *Store) lockGrants(ctx context.Context, user string) error {
	if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('memoryd.grants.' || current_schema()), hashtext($1))`, user); err != nil {
		return fmt.Errorf("lock grants: %w", err)
	}
	return nil
}

// RevokeReader: see GrantReader.
func (s *Store) RevokeReader(ctx context.Context, scope, user string) (bool, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM collection_readers WHERE scope = $1 AND user_id = $2`, scope, user)
	if err != nil {
		return false, fmt.Errorf("revoke reader: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}
