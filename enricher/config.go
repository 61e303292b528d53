package enricher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// DefaultVersion is the service version used when none is configured.
const DefaultVersion = "0.1.0"

// DefaultMaxFacts is Config.MaxFacts' default.
const DefaultMaxFacts = 50

// Store is everything the service reads and writes: the union of what each
// group of endpoints needs, declared beside it (Recaller for enrich,
// MemoryReader for the read tools, MemoryWriter for the write tools,
// ContextManager for the context item endpoints), so
// that one value can serve them all. *store.Store satisfies it.
type Store interface {
	Recaller
	MemoryReader
	MemoryWriter
	ContextManager
	VectorReader
	DocStore
}

// Observer is told about enrich replies (e.g. to feed a latency histogram).
// It is called on request goroutines and must be safe for concurrent use.
type Observer interface {
	// Enriched is told a reply's time from the request's arrival, and how
	// much of it the query's embedding took (0 without embeddings): the
	// rest is what this process and Postgres spent, which ingest competes
	// for and an embeddings endpoint does not. degraded is "" for a full
	// reply, else why it was degraded: one of the Degraded constants.
	Enriched(took, embedding time.Duration, degraded string)
}

// Why an enrich reply was degraded, as an Observer is told (a small fixed
// set, fit for a metric's label; the reply's reason is the text).
const (
	// DegradedTimeout: the store did not answer within Config.Timeout.
	DegradedTimeout = "timeout"
	// DegradedStoreUnavailable: the store failed (unreachable, an error).
	DegradedStoreUnavailable = "store_unavailable"
	// DegradedOverloaded: the request was not run for Config's
	// concurrency limits: refused at once (its user's or the lane's wait
	// full), or it waited past its deadline for its turn.
	DegradedOverloaded = "overloaded"
	// DegradedDocuments: facts and memories came, the document search did
	// not (timed out or failed).
	DegradedDocuments = "documents"
)

// DegradedReasons lists the Degraded constants.
func DegradedReasons() []string {
	return []string{DegradedTimeout, DegradedStoreUnavailable, DegradedOverloaded, DegradedDocuments}
}

// WorkObserver is an Observer also told when the service starts and ends
// its work on an enrich request: from when the request has its turn until
// its reply's content is known (reads, embedding and ranking). That is the
// span in which enrich competes with other work for Postgres and the CPU;
// memoryd's shared pool gives way to it (internal/app). Each
// EnrichWorking(true) is followed by exactly one EnrichWorking(false), on
// the same goroutine.
type WorkObserver interface {
	EnrichWorking(working bool)
}

// ErrorObserver is an Observer also told of every error reply, of any
// endpoint: its name (enrich, search, facts_set, ...) and the code sent
// (400 for a bad request, 404, 409, 413, 501, 507, 500). A degraded enrich
// reply is a reply, told to Enriched, not here.
type ErrorObserver interface {
	RequestFailed(endpoint string, code int)
}

// DefaultForgetTimeout is Config.ForgetTimeout's default.
const DefaultForgetTimeout = time.Minute

// Config configures a Service.
type Config struct {
	// Conn is the NATS connection the service answers on. Required.
	Conn *nats.Conn
	// Store holds the memory. Required.
	Store Store
	// Prefix is the first subject token(s). Default "memory".
	Prefix string
	// Version is the service's SemVer, shown by $SRV.INFO. Default
	// DefaultVersion.
	Version string
	// Timeout bounds an enrich request from its arrival to its reply; past
	// it the reply is degraded. Default 250ms.
	Timeout time.Duration
	// WriteTimeout bounds every other request but forget's work; past it
	// the reply is an error 500. A forget too waits at most WriteTimeout
	// for a slot. Default 5s.
	WriteTimeout time.Duration
	// ForgetTimeout bounds a forget's database side (memory.forget), from
	// its arrival: past it the forget is rolled back and the reply is an
	// error 500. A forget waits for the user's writes in flight and
	// deletes all their rows, seconds for a large user under load; the
	// rest (documents, stream events) then runs to its end in any case.
	// Meanwhile it holds one of the MaxToolInFlight slots. Default
	// DefaultForgetTimeout.
	ForgetTimeout time.Duration
	// ExportTimeout bounds an export page's work (memory.export). The
	// first page of a long export reads the whole memory and saves a copy
	// of it: seconds for tens of MB (a 94 MB memory took 9-10 s on 2
	// cores), past WriteTimeout; later pages read their own bytes.
	// Default events.DefaultExportTimeout.
	ExportTimeout time.Duration
	// MaxFacts caps the facts an enrich reply carries: the core facts
	// (CoreFactKeys), then the most recently set. Default 50.
	MaxFacts int
	// MaxInFlight caps the enrich requests the service works on at once.
	// Up to four times as many wait for a turn; one that cannot start
	// within Timeout of its arrival, or finds the wait full, is answered
	// degraded. Enrich never waits behind the other endpoints, which have
	// limits of their own. Default 64.
	MaxInFlight int
	// MaxUserEnrichInFlight caps one user's enrich requests worked on at
	// once (four times as many of the user wait for their turn, within
	// Timeout), so that one user's flood (a frontend confined to that
	// user's subjects) cannot take every enrich slot, the whole wait or
	// every store connection, and leave the other users' enrich degraded.
	// Default a quarter of MaxInFlight, and at most half of StoreConns
	// when that is set; at least 1.
	MaxUserEnrichInFlight int
	// StoreConns is how many Postgres connections the Store that enrich
	// reads from has (its pool's size); 0 when unknown. Each enrich
	// request being worked on holds one while it reads, so a user's
	// requests may take at most half of them by default
	// (MaxUserEnrichInFlight): with 16 of one user at once over 8
	// connections, another user's request waited for a connection behind
	// the flood's reads and was answered degraded.
	StoreConns int
	// MaxSearchInFlight caps the search requests worked on at once, and
	// MaxToolInFlight those of every other endpoint (store, clear, facts,
	// stats, forget), so that neither kind can take the slots or the store
	// connections enrich needs. Up to four times as many wait, each until
	// WriteTimeout after its arrival; past that, or when the wait is full,
	// the reply is a 500 "overloaded". Default 8 each.
	MaxSearchInFlight int
	MaxToolInFlight   int
	// MaxUserInFlight caps one user's search requests, and separately
	// their tool requests, worked on at once, so that one user (or a
	// tenant flooding in one user's name) cannot take every slot. Up to
	// four times as many of the user's wait for their turn (within
	// WriteTimeout of their arrival), so that a frontend's burst for one
	// user is served in turn; more are answered 500 "overloaded" at once.
	// Default 4.
	MaxUserInFlight int
	// Logger receives service events; message bodies are logged at debug
	// level only. Default slog.Default().
	Logger *slog.Logger
	// Observer receives every enrich reply's latency, for metrics. Optional.
	Observer Observer
	// TracerProvider, when set, gives every request a span that continues
	// the requester's trace (its traceparent header; tracing.go). Default
	// nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
	// Forget deletes everything kept about a user (memory.forget): memory,
	// turns, jobs and the user's events in the stream. Its result is the
	// reply. Optional: without it the endpoint answers 501.
	Forget func(ctx context.Context, userID string) (events.ForgetReply, error)
	// Embedder, when set, makes enrich and search hybrid (hybrid.go): the
	// query is embedded with it and the items' vectors of its Model (saved
	// by the worker's embed jobs) are searched beside the keywords.
	// Optional: without it retrieval is lexical.
	Embedder QueryEmbedder
	// EmbedTimeout bounds the query's embedding call, within Timeout; past
	// it, or when the endpoint fails, the request is answered lexically (not
	// degraded) and the outcome counted. With Embedder, must be positive
	// and under Timeout. Default
	// DefaultEmbedTimeout (100ms), or 40% of Timeout when that is less.
	EmbedTimeout time.Duration
	// VectorCacheBytes bounds the vectors this process keeps in memory for
	// hybrid retrieval (least recently used users evicted first). Default
	// DefaultVectorCacheBytes (48 MiB).
	VectorCacheBytes int64
	// DailyTokensPerUser is the per-user daily token cap the worker applies
	// (worker.Config.DailyTokensPerUser), shown in stats replies. Default
	// 0: none.
	DailyTokensPerUser int64
	// DocIndexer, when set, makes a put of a document over
	// InlineChunkBytes store it pending and enqueue its chunking (a job)
	// in the put's transaction; without it every document is chunked in
	// its put's request.
	DocIndexer DocIndexer
	// DocJobs are the shapes of the River jobs that name a document
	// (worker.DocumentJobs): a docs.delete deletes them with it, since
	// their arguments hold its id and its content's hash. Default none.
	DocJobs []store.RiverJobs
	// MaxDocumentBytes is the largest document content memory.docs.put
	// accepts. Default events.DefaultMaxDocumentBytes (8 MiB).
	MaxDocumentBytes int
	// MaxDocsSize caps the content size of all the documents, every
	// collection and owner together (store.DocumentPut.MaxTotalBytes): a
	// put that would go over it is refused (a 507 naming the cap) and
	// writes nothing. Default 0: no cap.
	MaxDocsSize int64
	// InlineChunkBytes is the largest document chunked in its put's
	// request when DocIndexer is set. Default DefaultInlineChunkBytes
	// (256 KiB).
	InlineChunkBytes int
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Timeout == 0 {
		c.Timeout = 250 * time.Millisecond
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.ForgetTimeout == 0 {
		c.ForgetTimeout = DefaultForgetTimeout
	}
	if c.ExportTimeout == 0 {
		c.ExportTimeout = events.DefaultExportTimeout
	}
	if c.MaxFacts == 0 {
		c.MaxFacts = DefaultMaxFacts
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 64
	}
	if c.MaxUserEnrichInFlight == 0 {
		c.MaxUserEnrichInFlight = c.MaxInFlight / 4
		if c.StoreConns > 0 {
			c.MaxUserEnrichInFlight = min(c.MaxUserEnrichInFlight, c.StoreConns/2)
		}
		c.MaxUserEnrichInFlight = max(1, c.MaxUserEnrichInFlight)
	}
	if c.MaxSearchInFlight == 0 {
		c.MaxSearchInFlight = 8
	}
	if c.MaxToolInFlight == 0 {
		c.MaxToolInFlight = 8
	}
	if c.MaxUserInFlight == 0 {
		c.MaxUserInFlight = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxDocumentBytes == 0 {
		c.MaxDocumentBytes = events.DefaultMaxDocumentBytes
	}
	if c.InlineChunkBytes == 0 {
		c.InlineChunkBytes = DefaultInlineChunkBytes
	}
	if c.EmbedTimeout == 0 {
		c.EmbedTimeout = min(DefaultEmbedTimeout, c.Timeout*2/5)
	}
	if c.VectorCacheBytes == 0 {
		c.VectorCacheBytes = DefaultVectorCacheBytes
	}
	return c
}

var (
	prefixRegexp = regexp.MustCompile(`^[^.\s*>]+(\.[^.\s*>]+)*$`)
	semVerRegexp = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$`)
)

func (c Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("enricher: Config.Conn is required")
	case c.Store == nil:
		return errors.New("enricher: Config.Store is required")
	case !prefixRegexp.MatchString(c.Prefix):
		return fmt.Errorf("enricher: Config.Prefix %q is not a subject prefix (dot-separated tokens without spaces or wildcards)", c.Prefix)
	case !semVerRegexp.MatchString(c.Version):
		return fmt.Errorf("enricher: Config.Version %q is not a SemVer version like 1.2.3", c.Version)
	case c.Timeout < 0:
		return fmt.Errorf("enricher: Config.Timeout %s is negative", c.Timeout)
	case c.WriteTimeout < 0:
		return fmt.Errorf("enricher: Config.WriteTimeout %s is negative", c.WriteTimeout)
	case c.ForgetTimeout < 0:
		return fmt.Errorf("enricher: Config.ForgetTimeout %s is negative", c.ForgetTimeout)
	case c.ExportTimeout < 0:
		return fmt.Errorf("enricher: Config.ExportTimeout %s is negative", c.ExportTimeout)
	case c.MaxFacts < 1:
		return fmt.Errorf("enricher: Config.MaxFacts %d is under 1", c.MaxFacts)
	case c.MaxDocumentBytes < 1:
		return fmt.Errorf("enricher: Config.MaxDocumentBytes %d is under 1", c.MaxDocumentBytes)
	case c.MaxDocsSize < 0:
		return fmt.Errorf("enricher: Config.MaxDocsSize %d is negative", c.MaxDocsSize)
	case c.InlineChunkBytes < 1:
		return fmt.Errorf("enricher: Config.InlineChunkBytes %d is under 1", c.InlineChunkBytes)
	case c.MaxInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxInFlight %d is under 1", c.MaxInFlight)
	case c.StoreConns < 0:
		return fmt.Errorf("enricher: Config.StoreConns %d is negative", c.StoreConns)
	case c.MaxUserEnrichInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxUserEnrichInFlight %d is under 1", c.MaxUserEnrichInFlight)
	case c.MaxUserEnrichInFlight > c.MaxInFlight:
		return fmt.Errorf("enricher: Config.MaxUserEnrichInFlight %d is above Config.MaxInFlight %d", c.MaxUserEnrichInFlight, c.MaxInFlight)
	case c.MaxSearchInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxSearchInFlight %d is under 1", c.MaxSearchInFlight)
	case c.MaxToolInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxToolInFlight %d is under 1", c.MaxToolInFlight)
	case c.MaxUserInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxUserInFlight %d is under 1", c.MaxUserInFlight)
	case c.Embedder != nil && (c.EmbedTimeout <= 0 || c.EmbedTimeout >= c.Timeout):
		return fmt.Errorf("enricher: Config.EmbedTimeout %s is not positive and under Timeout (%s)", c.EmbedTimeout, c.Timeout)
	case c.VectorCacheBytes < 0:
		return fmt.Errorf("enricher: Config.VectorCacheBytes %d is negative", c.VectorCacheBytes)
	}
	return nil
}
