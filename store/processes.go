package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Process liveness: every worker process has a row in memoryd_processes,
// keyed by its River client id, and renews it while it runs (see
// worker/recover.go for the protocol).

// RegisterProcess records a worker process as alive, or alive again, with
// what it embeds and extracts with (p).
func (s *Store) RegisterProcess(ctx context.Context, id string, p ProcessRecord) error {
	_, err := s.db.Exec(ctx, `INSERT INTO memoryd_processes (id, embed_model, extractor) VALUES ($1, nullif($2, ''), nullif($3, ''))
		ON CONFLICT (id) DO UPDATE SET started_at = now(), heartbeat_at = now(), embed_model = excluded.embed_model, extractor = excluded.extractor`,
		id, p.EmbedModel, p.Extractor)
	if err != nil {
		return fmt.Errorf("register process: %w", err)
	}
	return nil
}

// ProcessRecord is what a process records of itself beside its liveness.
type ProcessRecord struct {
	// EmbedModel is the embedding model it embeds and searches with, ""
	// for none.
	EmbedModel string
	// Extractor names what it extracts with ("rules", "llm <model>"), ""
	// when it runs no extraction job.
	Extractor string
}

// Heartbeat renews a process's liveness. It returns false when the row is
// gone: another process found the heartbeat too old, declared the process
// dead and handed its running jobs on (TakeOverJobs). It records
// Postgres's clock as the renewal ran (its now()) in s's Clock as a
// reading: a process's heartbeat keeps the clock River schedules by
// current.
func (s *Store) Heartbeat(ctx context.Context, id string) (alive bool, err error) {
	err = s.onOneConn(ctx, func(db DBTX) error {
		var dbNow time.Time
		sent := time.Now()
		err := db.QueryRow(ctx, `WITH u AS (UPDATE memoryd_processes SET heartbeat_at = now() WHERE id = $1 RETURNING 1)
			SELECT EXISTS (SELECT 1 FROM u), now()`, id).Scan(&alive, &dbNow)
		if err == nil {
			s.Clock().Observe(sent, time.Now(), dbNow)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return alive, nil
}

// EndProcess marks a process that stopped (its jobs have returned) as dead
// at once, so that the next TakeOverJobs hands on anything it left running
// and removes its row.
func (s *Store) EndProcess(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = '-infinity' WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("end process: %w", err)
	}
	return nil
}

// LiveExtractors returns the extractors of the worker processes whose
// heartbeat is more recent than within, each once.
func (s *Store) LiveExtractors(ctx context.Context, within time.Duration) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT extractor FROM memoryd_processes
		WHERE extractor IS NOT NULL AND heartbeat_at > now() - $1::interval ORDER BY extractor`, within)
	if err != nil {
		return nil, fmt.Errorf("live extractors: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("live extractors: %w", err)
	}
	return out, nil
}

// LiveProcesses counts the worker processes whose heartbeat is more recent
// than within.
func (s *Store) LiveProcesses(ctx context.Context, within time.Duration) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM memoryd_processes WHERE heartbeat_at > now() - $1::interval`, within).Scan(&n); err != nil {
		return 0, fmt.Errorf("live processes: %w", err)
	}
	return n, nil
}

// EnrichProcessPrefix begins the id of every process recorded by a serve
// that runs no worker (worker.Presence): it searches its model's vectors
// but runs no embed job. Such an id is the prefix and 16 hex digits
// (enrichProcessID), which a worker's id (River's, of its host name and a
// timestamp) never is, even on a host whose name begins "enrich-".
const EnrichProcessPrefix = "enrich-"

// enrichProcessID matches the ids of EnrichProcessPrefix.
const enrichProcessID = "^" + EnrichProcessPrefix + "[0-9a-f]{16}$"

// LiveEmbedModels returns the embedding models of the worker processes
// whose heartbeat is more recent than within, the model of the most
// recently started process first: the models whose embed jobs some running
// process works. Processes that run no worker (EnrichProcessPrefix) are
// left out.
func (s *Store) LiveEmbedModels(ctx context.Context, within time.Duration) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT embed_model FROM memoryd_processes
		WHERE embed_model IS NOT NULL AND heartbeat_at > now() - $1::interval AND id !~ $2
		GROUP BY embed_model ORDER BY max(started_at) DESC, embed_model`, within, enrichProcessID)
	if err != nil {
		return nil, fmt.Errorf("live embedding models: %w", err)
	}
	models, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("live embedding models: %w", err)
	}
	return models, nil
}
