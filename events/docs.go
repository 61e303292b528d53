package events

import (
	"context"
	"encoding/json"
	"time"
)

// Knowledge bases (memory.docs.*, docs/protocol.md "Documents"): documents
// in collections, cut into chunks that are searched (and, in enrich, cited)
// beside context items. A user's own collections are read and written on
// the user's subjects (<prefix>.docs.<op>.<user-token>); a shared scope's on
// its own (<prefix>.shared.docs.<op>.<scope-token>), which NATS permissions
// give to the scope's writers. A user reads a shared scope's collections
// from the user's subjects only when an operator granted it (memoryd docs
// grant). The identity is the subject's token; the body's user_id must map
// to it: on a shared scope's subjects user_id is the scope's name.

// Limits of the documents endpoints.
const (
	// DefaultMaxDocumentBytes is the largest document content a put
	// accepts unless serve's --max-document-bytes says otherwise. A
	// NATS request must also fit the server's max_payload (1 MiB by
	// default): larger documents need max_payload raised.
	DefaultMaxDocumentBytes = 8 << 20
	// DefaultDocsListLimit and MaxDocsListLimit bound memory.docs.list's page.
	DefaultDocsListLimit = 100
	MaxDocsListLimit     = 1000
	// MaxDocsCollections bounds how many collections one search names.
	MaxDocsCollections = 32
)

// Document statuses (DocumentInfo.Status, DocsPutReply.Status).
const (
	DocPending = "pending"
	DocReady   = "ready"
)

// DocsPutRequest stores a document (memory.docs.put).
type DocsPutRequest struct {
	// UserID is the owner the subject names: the user, or with Shared the
	// shared scope (1..64 letters, digits, '_' or '-').
	UserID string `json:"user_id"`
	// Shared sends the request on the shared scope's subject
	// (<prefix>.shared.docs.<op>.<scope>) rather than the user's. It is
	// the client's choice of subject, not part of the body.
	Shared bool `json:"-"`
	// Collection is created on its first put: 1..64 letters, digits, '_'
	// or '-'.
	Collection string `json:"collection"`
	// DocID is the document's id in the collection; Source when absent.
	// At least one of them is required.
	DocID string `json:"doc_id,omitempty"`
	// Source is the document's file name or URL; DocID when absent. One
	// naming source code or configuration by its extension or name
	// ("store.go", "app.py", "Dockerfile", "my.ini", ".env"), or a name
	// without an extension of content opening with "#!" (a script), has
	// the content chunked as code.
	Source string `json:"source,omitempty"`
	// Content is the document's text, Markdown or source code.
	Content string `json:"content"`
	// Metadata is a JSON object of at most 4096 bytes, kept as given.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// ChunkTokens and OverlapTokens set the collection's chunking when this
	// put creates it (default 200 and 30 tokens); afterwards 0 or the
	// collection's own takes the collection's, another is a 400.
	ChunkTokens   int `json:"chunk_tokens,omitempty"`
	OverlapTokens int `json:"overlap_tokens,omitempty"`
}

// DocsPutReply says what a put did and when the document is searchable.
type DocsPutReply struct {
	Collection string `json:"collection"`
	DocID      string `json:"doc_id"`
	// Hash is the content's SHA-256 (hex).
	Hash string `json:"hash"`
	// Unchanged: the document already had this content; nothing changed.
	Unchanged bool `json:"unchanged"`
	// Status is DocReady or DocPending; Searchable is Status == DocReady.
	// A pending document is chunked by job JobID (a River job), after
	// which it is searchable; memory.docs.list shows its status.
	Status     string `json:"status"`
	Searchable bool   `json:"searchable"`
	Chunks     int    `json:"chunks"`
	JobID      int64  `json:"job_id,omitempty"`
	// LargestChunkTokens is the tokens of the document's largest chunk as
	// enrich's budget counts it in an injection (its lines' indentation
	// and escapes, a leading tab as four spaces; not its citation) when
	// this put chunked it; absent otherwise. A chunk over a request's
	// max_tokens is never injected by enrich.
	LargestChunkTokens int `json:"largest_chunk_tokens,omitempty"`
}

// DocsDeleteRequest deletes a document (memory.docs.delete).
type DocsDeleteRequest struct {
	UserID     string `json:"user_id"`
	Shared     bool   `json:"-"` // as in DocsPutRequest
	Collection string `json:"collection"`
	DocID      string `json:"doc_id"`
}

// DocsDeleteReply says whether there was a document to delete.
type DocsDeleteReply struct {
	Deleted bool `json:"deleted"`
}

// DocsListRequest lists a collection's documents (memory.docs.list), in
// doc id order, a page at a time.
type DocsListRequest struct {
	UserID     string `json:"user_id"`
	Shared     bool   `json:"-"` // as in DocsPutRequest
	Collection string `json:"collection"`
	// After is the previous page's Next ("" from the start).
	After string `json:"after,omitempty"`
	// Limit is the page size, 1..MaxDocsListLimit; 0 means
	// DefaultDocsListLimit.
	Limit int `json:"limit,omitempty"`
}

// DocsListReply is a page of documents; Next is "" on the last page.
type DocsListReply struct {
	Documents []DocumentInfo `json:"documents"`
	Next      string         `json:"next"`
}

// DocumentInfo describes a document (not its content).
type DocumentInfo struct {
	DocID     string          `json:"doc_id"`
	Source    string          `json:"source"`
	Hash      string          `json:"hash"`
	Metadata  json.RawMessage `json:"metadata"`
	Size      int64           `json:"size"`
	Status    string          `json:"status"`
	Chunks    int             `json:"chunks"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// DocsSearchRequest searches chunks (memory.docs.search).
type DocsSearchRequest struct {
	UserID string `json:"user_id"`
	Shared bool   `json:"-"` // as in DocsPutRequest
	Query  string `json:"query"`
	// Collections names the collections searched: a name for the caller's
	// own, "scope/name" for a shared scope's the user was granted. Absent:
	// all the caller may read.
	Collections []string `json:"collections,omitempty"`
	// MaxResults caps the chunks, 1..50; nil means 5.
	MaxResults *int `json:"max_results,omitempty"`
	// Threshold is the least score a chunk needs, 0..1; nil means 0.
	Threshold *float64 `json:"threshold,omitempty"`
}

// DocsDefaultsRequest reads or sets a user's default collections
// (memory.docs.defaults): those enrich searches when a request has no
// collections field. A user's subject only (shared scopes have no
// enrich).
type DocsDefaultsRequest struct {
	UserID string `json:"user_id"`
	// Collections, when present, replaces the defaults (names as in
	// DocsSearchRequest, at most MaxEnrichCollections; each must be
	// readable now); an empty list clears them. Absent (nil, sent as
	// null): the defaults are only read.
	Collections []string `json:"collections"`
}

// DocsDefaultsReply is the user's default collections after the request,
// in the order set: those the user may still read (a revoked grant's are
// left out).
type DocsDefaultsReply struct {
	Collections []string `json:"collections"`
}

// DocsSearchReply holds the chunks found, best first.
type DocsSearchReply struct {
	Chunks []DocChunk `json:"chunks"`
}

// DocChunk is a chunk found, with what a citation needs.
type DocChunk struct {
	Collection  string   `json:"collection"`
	DocID       string   `json:"doc_id"`
	Source      string   `json:"source"`
	HeadingPath []string `json:"heading_path"`
	ChunkIndex  int      `json:"chunk_index"`
	Text        string   `json:"text"`
	// Start and End are the chunk's byte offsets in the document.
	Start int     `json:"start"`
	End   int     `json:"end"`
	Score float64 `json:"score"`
}

// docsEndpoint is the endpoint of op for a user or a shared scope.
func docsEndpoint(op string, shared bool) string {
	if shared {
		return "shared.docs." + op
	}
	return "docs." + op
}

// PutDocument stores a document on the user's subject, or the shared
// scope's with req.Shared.
func (c *Client) PutDocument(ctx context.Context, req DocsPutRequest) (DocsPutReply, error) {
	var reply DocsPutReply
	err := c.call(ctx, docsEndpoint("put", req.Shared), req.UserID, req, &reply)
	return reply, err
}

// DeleteDocument deletes a document (see PutDocument for the subject).
func (c *Client) DeleteDocument(ctx context.Context, req DocsDeleteRequest) (DocsDeleteReply, error) {
	var reply DocsDeleteReply
	err := c.call(ctx, docsEndpoint("delete", req.Shared), req.UserID, req, &reply)
	return reply, err
}

// ListDocuments lists a page of a collection's documents (see PutDocument
// for the subject).
func (c *Client) ListDocuments(ctx context.Context, req DocsListRequest) (DocsListReply, error) {
	var reply DocsListReply
	err := c.call(ctx, docsEndpoint("list", req.Shared), req.UserID, req, &reply)
	return reply, err
}

// DocDefaults reads, or with req.Collections non-nil sets, the user's
// default collections (on the user's subject).
func (c *Client) DocDefaults(ctx context.Context, req DocsDefaultsRequest) (DocsDefaultsReply, error) {
	var reply DocsDefaultsReply
	err := c.call(ctx, docsEndpoint("defaults", false), req.UserID, req, &reply)
	return reply, err
}

// SearchDocuments searches chunks (see PutDocument for the subject).
func (c *Client) SearchDocuments(ctx context.Context, req DocsSearchRequest) (DocsSearchReply, error) {
	req.Query = readText(req.Query)
	var reply DocsSearchReply
	err := c.call(ctx, docsEndpoint("search", req.Shared), req.UserID, req, &reply)
	return reply, err
}
