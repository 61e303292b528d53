package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// PruneArgs is the periodic River job that keeps memory under its size
// limits and clears expired turn text. River inserts periodic jobs on the
// elected leader only, but any process may work them: a run waits for no
// other, and one that finds a prune running elsewhere does nothing (see
// Prune).
type PruneArgs struct{}

// InsertOpts puts the job on the maintenance queue, one at a time: a new
// leader's first run is not queued beside a prune still running.
func (PruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// Kind is River's job kind.
func (PruneArgs) Kind() string { return "memoryd_prune" }

// PruneLimits are the limits one prune run applies; a zero (or negative)
// field disables its limit.
type PruneLimits struct {
	// MaxBytes bounds the live size of memoryd's tables (store.SizeReport).
	MaxBytes int64
	// MaxContextPerUser bounds each user's context items.
	MaxContextPerUser int
	// TurnRetention is how long a processed turn keeps its text.
	TurnRetention time.Duration
	// EmbedModel is the embedding model whose vectors serve this
	// deployment's queries (empty: embedding is off here, and no vector is
	// deleted for size). Over MaxBytes, the vectors of every other model
	// that no running worker process uses (left by a model change) are
	// deleted before any context item.
	EmbedModel string
	// ProcessTimeout is how recent a worker process's heartbeat must be
	// for it to count as running, its model's vectors kept
	// (Config.ProcessTimeout). Default (0) Config.ProcessTimeout's, 10s.
	ProcessTimeout time.Duration
}

// PruneReport is what one prune run found and removed; it is logged and kept
// as the job's output. Before and After are measured only with a size limit
// (measuring reads the turns table); they are zero otherwise.
type PruneReport struct {
	Before store.SizeReport `json:"before"`
	// TurnTextsCleared counts processed turns whose text was cleared after
	// the retention period; TurnTextBytes is the stored size it took.
	TurnTextsCleared int64 `json:"turn_texts_cleared"`
	TurnTextBytes    int64 `json:"turn_text_bytes"`
	// TurnTextsClearedForSize counts processed turns whose text was
	// cleared over the size limit, within their retention, before any
	// context item was deleted for size; TurnTextBytesForSize the stored
	// size it took.
	TurnTextsClearedForSize int64 `json:"turn_texts_cleared_for_size"`
	TurnTextBytesForSize    int64 `json:"turn_text_bytes_for_size"`
	RemovedForSize          int64 `json:"removed_for_size"`
	// VectorsRemoved and ChunkVectorsRemoved count the vectors of other
	// models than PruneLimits.EmbedModel deleted for size, of context items
	// and of document chunks.
	VectorsRemoved      int64 `json:"vectors_removed,omitempty"`
	ChunkVectorsRemoved int64 `json:"chunk_vectors_removed,omitempty"`
	RemovedForCap       int64 `json:"removed_for_cap"`
	// ContextSpared is set when the size without any context item is over
	// the limit (see store.SizeReport.FloorBytes, the text of pending and
	// failed turns, and that of turns the stream stored in the last hour,
	// which clearTextForSize spares): deleting context could not meet the
	// limit, so none was deleted for size.
	ContextSpared bool `json:"context_spared"`
	// OverLimit is set when the size is still over the limit afterwards.
	OverLimit bool             `json:"over_limit"`
	After     store.SizeReport `json:"after"`
	// VacuumDenied names the tables the prune vacuums that the role
	// (VacuumRole) may not VACUUM (store.VacuumDenied): Postgres skipped
	// them, so what this prune freed is not reusable space.
	VacuumDenied []string `json:"vacuum_denied,omitempty"`
	VacuumRole   string   `json:"vacuum_role,omitempty"`
	// Sized is set when the prune measured the size (a size limit given):
	// without it, Before and After are zeros that say nothing of the
	// database, and the JSON has them null.
	Sized bool `json:"-"`
}

// MarshalJSON writes the report with "before" and "after" null when the
// prune measured no size: their zeros read as an empty database to a
// script of memoryd prune --json, and in the prune job's recorded output.
func (r PruneReport) MarshalJSON() ([]byte, error) {
	type plain PruneReport // without this method
	out := struct {
		// Shallower than plain's, so these are the ones written; in
		// the order of the fields.
		Before *store.SizeReport `json:"before"`
		plain
		After *store.SizeReport `json:"after"`
	}{plain: plain(r)}
	if r.Sized {
		out.Before, out.After = &r.Before, &r.After
	}
	return json.Marshal(out)
}

// pruneBatch bounds one DELETE or UPDATE, so that pruning holds row locks
// briefly and never blocks enrich (which only reads).
const pruneBatch = 1000

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	w *Worker
}

func (p *pruneWorker) Work(ctx context.Context, job *river.Job[PruneArgs]) error {
	cfg := p.w.cfg
	if cfg.DisableIngest {
		// A replay's own workers take jobs beside the serves, with the
		// replay command's settings, which need not be the serves' (its
		// default --turn-retention cleared the text of turns serves keep
		// for 30 days): the limits are the serves' to apply. Handed back
		// at once, for the next serve that fetches it (the serves' interval
		// is theirs, unknown here).
		return river.JobSnooze(5 * time.Second)
	}
	// A stop ends the run at once: what it deleted is committed, and the
	// next period's run (this process's next start, or another's) does the
	// rest. It took a whole --shutdown-timeout before, and the run was
	// then retried from the start anyway.
	ctx, stopped, cancel := p.w.halting(ctx)
	defer cancel()
	limits := PruneLimits{MaxBytes: cfg.MaxDBSize, MaxContextPerUser: cfg.MaxContextPerUser, TurnRetention: cfg.TurnRetention,
		EmbedModel: p.w.embedModel(), ProcessTimeout: cfg.ProcessTimeout}
	rep, ran, err := pruneOnce(ctx, cfg.Store, limits, false)
	if err != nil && stopped() {
		p.w.logger.Info("prune ended by the stop; the next run goes on", "removed_for_size", rep.RemovedForSize,
			"removed_for_cap", rep.RemovedForCap, "turn_texts_cleared", rep.TurnTextsCleared,
			"vectors_removed", rep.VectorsRemoved, "chunk_vectors_removed", rep.ChunkVectorsRemoved)
		cfg.Observer.Pruned(rep.RemovedForSize + rep.RemovedForCap)
		return nil
	}
	if err != nil {
		return err
	}
	if !ran {
		// Another process's run (its prune job, or a caller of Prune)
		// measures and deletes; this one would delete it again.
		p.w.logger.Debug("prune skipped: another prune is running")
		return nil
	}
	cfg.Observer.Pruned(rep.RemovedForSize + rep.RemovedForCap)
	if so, ok := cfg.Observer.(SizeObserver); ok && cfg.MaxDBSize > 0 {
		so.Sized(rep.After.LiveBytes, rep.After.FloorBytes, rep.OverLimit)
	}
	attrs := []any{"removed_for_size", rep.RemovedForSize, "removed_for_cap", rep.RemovedForCap,
		"turn_texts_cleared", rep.TurnTextsCleared, "turn_text_bytes_cleared", rep.TurnTextBytes}
	if rep.TurnTextsClearedForSize > 0 {
		attrs = append(attrs, "turn_texts_cleared_for_size", rep.TurnTextsClearedForSize, "turn_text_bytes_cleared_for_size", rep.TurnTextBytesForSize)
	}
	if rep.VectorsRemoved+rep.ChunkVectorsRemoved > 0 {
		attrs = append(attrs, "vectors_removed", rep.VectorsRemoved, "chunk_vectors_removed", rep.ChunkVectorsRemoved)
	}
	if cfg.MaxDBSize > 0 {
		attrs = append(attrs, "live_bytes_before", rep.Before.LiveBytes, "live_bytes_after", rep.After.LiveBytes,
			"floor_bytes", rep.After.FloorBytes, "max_db_size", cfg.MaxDBSize)
	}
	p.w.logger.Info("pruned", attrs...)
	if msg := store.VacuumDeniedMessage(rep.VacuumRole, rep.VacuumDenied); msg != "" {
		// Said every run, as the size limit's floor is: the operator must act.
		p.w.logger.Warn("prune could not VACUUM: "+msg, "real_bytes", rep.After.RealBytes, "live_bytes", rep.After.LiveBytes)
	}
	switch {
	case rep.OverLimit && !rep.ContextSpared:
		// Context was deleted, but memory written while it pruned left it
		// over: the next run goes on, nothing for the operator to do.
		p.w.logger.Info("memory is still over its size limit after this prune (written while it ran); the next prune goes on",
			"removed_for_size", rep.RemovedForSize, "live_bytes", rep.After.LiveBytes, "max_db_size", cfg.MaxDBSize)
	case rep.OverLimit:
		// Said on every run until it holds: the operator must act.
		p.w.logger.Warn("memory is over its size limit and pruning cannot reach it: it spares context when deleting all of it would not be enough (facts, fact history, documents and the text of turns pending or failed extraction, or stored in the last hour, stay; the last hour's is cleared once it is an hour old); raise the limit if this lasts for more than an hour",
			"live_bytes", rep.After.LiveBytes, "max_db_size", cfg.MaxDBSize, "floor_bytes", rep.After.FloorBytes,
			"retained_turn_text_bytes", rep.After.TurnTextBytes, "context_spared", rep.ContextSpared)
	}
	return river.RecordOutput(ctx, rep)
}

// Prune applies the limits once: first the per-user cap on context items,
// then the turn text retention, then the size limit.
//
// The per-user cap deletes each user's oldest items beyond the cap. The
// retention clears the text of processed turns processed longer ago than it
// (the stream keeps the events; a replay writes the text back); pending and
// failed turns keep theirs. These two do not depend on size.
//
// The size limit first clears the text of processed turns still within
// their retention, oldest first, as much as the excess needs: the stream
// keeps it and a replay writes it back, and enrich never reads it, where a
// context item deleted is memory users lose (an audit under an 8M limit saw
// 17 of 18 users left with no context, to make room for turn text the
// retention cleared three minutes later). Then it deletes the oldest
// context items over all users in batches, as many as the excess needs and
// no more. Oldest first over all users
// because age is the one criterion that treats every user alike; the per-user
// cap is what bounds one user's share. When the size without any context item
// is already over the limit (facts, fact history, turn records, turn text
// of pending and failed turns), deleting context cannot meet it, so none is
// deleted for size and the report says so. Facts are never pruned.
//
// Size is measured from Postgres, see store.SizeReport; after deleting or
// clearing, a plain VACUUM makes the space reusable without blocking reads or
// writes.
//
// One prune runs at a time on a database, whatever the processes: each
// measures the excess and deletes all of it, so two at once deleted it
// twice. Prune waits for a prune running elsewhere to end, then measures.
//
// A size limit under the floor is refused (*SizeFloorError) before
// anything is pruned; the periodic job (whose limit a Worker's Start only
// warns of) prunes what it can when the floor is past the limit, and
// reports the context spared.
func Prune(ctx context.Context, s *store.Store, l PruneLimits) (PruneReport, error) {
	if l.MaxBytes > 0 {
		if _, err := sizeOverFloor(ctx, s, l.MaxBytes); err != nil {
			return PruneReport{}, err
		}
	}
	rep, _, err := pruneOnce(ctx, s, l, true)
	return rep, err
}

// pruneLock names the lock a prune holds (store.Exclusively).
const pruneLock = "prune"

// pruneOnce runs prune under pruneLock; without wait, ran is false when a
// prune runs elsewhere, and nothing was done.
func pruneOnce(ctx context.Context, s *store.Store, l PruneLimits, wait bool) (rep PruneReport, ran bool, err error) {
	ran, err = s.Exclusively(ctx, pruneLock, wait, func() error {
		var err error
		rep, err = prune(ctx, s, l)
		return err
	})
	if err != nil && !ran {
		err = fmt.Errorf("prune: %w", err)
	}
	return rep, ran, err
}

func prune(ctx context.Context, s *store.Store, l PruneLimits) (PruneReport, error) {
	var rep PruneReport
	var err error
	if l.MaxBytes > 0 || l.MaxContextPerUser > 0 || l.TurnRetention > 0 {
		// A VACUUM the role may not run is skipped with a warning only
		// the server sees: said in the report instead.
		role, tables, err := s.VacuumDenied(ctx)
		if err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
		if len(tables) > 0 {
			rep.VacuumRole, rep.VacuumDenied = role, tables
		}
	}
	if l.MaxBytes > 0 {
		// Measured first: the measure raises the high-water marks with
		// the dead rows the vacuum then makes reusable.
		if rep.Before, err = s.MeasureSize(ctx); err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
		rep.Sized = true
		// Deleted documents count for nothing in the size, so their space
		// must be reusable (autovacuum may be off).
		if _, err := s.VacuumDocuments(ctx); err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
	}
	if l.MaxContextPerUser > 0 {
		for {
			n, err := s.DeleteContextOverCap(ctx, l.MaxContextPerUser, pruneBatch)
			if err != nil {
				return rep, fmt.Errorf("prune: %w", err)
			}
			rep.RemovedForCap += n
			if n < pruneBatch {
				break
			}
		}
		if rep.RemovedForCap > 0 {
			if err := s.VacuumContext(ctx); err != nil {
				return rep, fmt.Errorf("prune: %w", err)
			}
		}
	}
	if l.TurnRetention > 0 {
		for {
			n, b, err := s.ClearTurnText(ctx, l.TurnRetention, pruneBatch)
			if err != nil {
				return rep, fmt.Errorf("prune: %w", err)
			}
			rep.TurnTextsCleared += n
			rep.TurnTextBytes += b
			if n < pruneBatch {
				break
			}
		}
		if rep.TurnTextsCleared > 0 {
			if err := s.VacuumTurns(ctx); err != nil {
				return rep, fmt.Errorf("prune: %w", err)
			}
		}
	}
	if l.MaxBytes > 0 {
		live := l.ProcessTimeout
		if live <= 0 {
			live = defaultProcessTimeout
		}
		if err := pruneToSize(ctx, s, l.MaxBytes, l.EmbedModel, live, &rep); err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
	}
	if err := s.RecordPrune(ctx, rep.RemovedForCap+rep.RemovedForSize); err != nil {
		return rep, fmt.Errorf("prune: %w", err)
	}
	if l.MaxBytes > 0 {
		if rep.After, err = s.MeasureSize(ctx); err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
		rep.OverLimit = rep.After.LiveBytes > l.MaxBytes
	}
	return rep, nil
}

// pruneToSize deletes the oldest context items until the live size is at
// most maxBytes, never more than the excess, and none when the size without
// any context item is over maxBytes. Vectors of other models than
// embedModel (when set) that no running process uses go first: they serve
// no query.
func pruneToSize(ctx context.Context, s *store.Store, maxBytes int64, embedModel string, processTimeout time.Duration, rep *PruneReport) error {
	// Measuring again after each round corrects for what VACUUM and index
	// pages do to the estimate; a few rounds always suffice.
	vectorsChecked, textRounds := embedModel == "", 0
	for round := 0; round < 5; round++ {
		size, err := s.MeasureSize(ctx)
		if err != nil {
			return err
		}
		excess := size.LiveBytes - maxBytes
		if excess > 0 && !vectorsChecked {
			vectorsChecked = true
			if freed, err := dropUnusedVectors(ctx, s, embedModel, processTimeout, rep); err != nil {
				return err
			} else if freed {
				round-- // measure again; this round deleted no memory
				continue
			}
		}
		// Text is cleared for the excess measured, no more; the VACUUM
		// after it can grow the estimate by a few pages (its first run
		// creates the free-space and visibility maps of turns, its TOAST
		// table and indexes, up to ~24 KB each), so what is left over is
		// cleared in a round or two more before any context item goes.
		if excess > 0 && textRounds < textForSizeRounds {
			textRounds++
			if freed, err := clearTextForSize(ctx, s, excess, rep); err != nil {
				return err
			} else if freed {
				round-- // measure again; this round deleted no memory
				continue
			}
		}
		if excess <= 0 || size.BytesPerContextRow() <= 0 {
			return nil
		}
		if size.LiveBytes-size.ContextLiveBytes() > maxBytes {
			rep.ContextSpared = true
			return nil
		}
		// Less a hair: an excess of exactly k rows' bytes must not read as
		// k and a rounding error.
		want := int64(math.Ceil(float64(excess)/size.BytesPerContextRow() - 1e-6))
		var removed int64
		for removed < want {
			n, err := s.DeleteOldestContext(ctx, int(min(want-removed, pruneBatch)))
			if err != nil {
				return err
			}
			if n == 0 {
				break // nothing left that is not locked
			}
			removed += n
		}
		rep.RemovedForSize += removed
		if removed == 0 {
			return nil
		}
		if err := s.VacuumContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// textForSizeRounds bounds the rounds of pruneToSize that clear turn text.
const textForSizeRounds = 3

// textBatch bounds one UPDATE of clearTextForSize, which also stops at the
// turn whose text covers the excess.
const textBatch = 100

// textForSizeMinAge spares, from clearTextForSize, the turns the stream
// stored in the last hour: a conversation's next extraction reads its
// latest turns as context for the model (store.PriorConversationTurns),
// and a conversation under way is one of the last hour. Not those
// processed in it: a replay processes old turns again. A conversation resumed
// later is extracted without them, which is what the limit costs; before,
// it cost users' memory instead.
const textForSizeMinAge = time.Hour

// overCapArgs matches the arguments of the jobs that extract again with the
// model the turns a spend cap sent offline (workOverCap reads their text).
const overCapArgs = `{"over_cap": true}`

// clearTextForSize clears the text of processed turns, oldest first,
// whatever their retention (but not of those an over-cap job waits to
// extract again with the model), until the stored bytes cleared reach excess or
// none is left (pending and failed turns keep theirs), counts them in rep
// and, when it cleared any, makes their space reusable; it reports whether
// it did.
func clearTextForSize(ctx context.Context, s *store.Store, excess int64, rep *PruneReport) (bool, error) {
	var turns, bytes int64
	for bytes < excess {
		n, b, err := s.ClearTurnTextForSize(ctx, textForSizeMinAge, extractJobs, overCapArgs, textBatch, excess-bytes)
		turns, bytes = turns+n, bytes+b
		if err != nil {
			rep.TurnTextsClearedForSize += turns
			rep.TurnTextBytesForSize += bytes
			return false, err
		}
		if n < textBatch {
			break
		}
	}
	rep.TurnTextsClearedForSize += turns
	rep.TurnTextBytesForSize += bytes
	if turns == 0 {
		return false, nil
	}
	if err := s.VacuumTurns(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// dropUnusedVectors deletes the vectors of the models that neither
// embedModel is nor a running process uses (store.DeleteOtherModelVectors),
// counts them in rep and, when it deleted any, makes their space reusable;
// it reports whether it did.
func dropUnusedVectors(ctx context.Context, s *store.Store, embedModel string, processTimeout time.Duration, rep *PruneReport) (bool, error) {
	items, chunks, err := s.DeleteOtherModelVectors(ctx, embedModel, processTimeout, pruneBatch)
	rep.VectorsRemoved += items
	rep.ChunkVectorsRemoved += chunks
	if err != nil || items+chunks == 0 {
		return false, err
	}
	if err := s.VacuumContext(ctx); err != nil {
		return false, err
	}
	if _, err := s.VacuumDocuments(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// SizeFloorError is returned by Worker.Start when the size limit is below
// what pruning can reach: the size of the tables without any context item and
// without any turn text.
type SizeFloorError struct {
	// Limit is the configured limit, Floor the size pruning cannot go under
	// (store.SizeReport.FloorBytes), both in bytes.
	Limit, Floor int64
}

func (e *SizeFloorError) Error() string { return "worker: " + e.Describe("Config.MaxDBSize") }

// Describe states the error in one sentence, naming the setting as the
// caller knows it (a flag, a field).
func (e *SizeFloorError) Describe(setting string) string {
	return fmt.Sprintf("%s %s is below %s, the size that pruning cannot go under (facts, fact history, clears, turn records without their text, knowledge base documents with their chunks and vectors, and indexes)",
		setting, formatSize(e.Limit), formatSize(e.Floor))
}

// checkSizeFloor logs the figures the size limit is compared with, and
// an error when the limit is below the floor. It does not refuse to start:
// the floor grows with facts and turns, so a limit accepted at one start
// was refused at the next, and a restart or crash of every replica left
// none running (a lifecycle walk); over the limit, the prune spares
// context rather than deleting it all for nothing, and says so every run,
// as memoryd_db_over_limit does.
func (w *Worker) checkSizeFloor(ctx context.Context) error {
	if w.cfg.MaxDBSize <= 0 {
		return nil
	}
	size, err := sizeOverFloor(ctx, w.cfg.Store, w.cfg.MaxDBSize)
	var floor *SizeFloorError
	if errors.As(err, &floor) {
		w.logger.Error(floor.Describe("the size limit")+": running on, pruning what it can; raise the limit",
			"max_db_size", floor.Limit, "floor_bytes", floor.Floor)
		return nil
	}
	if err != nil {
		return err
	}
	w.logger.Info("size limit", "max_db_size", w.cfg.MaxDBSize, "live_bytes", size.LiveBytes, "floor_bytes", size.FloorBytes,
		"turn_text_bytes", size.TurnTextBytes, "context_bytes", size.ContextLiveBytes())
	return nil
}

// sizeOverFloor measures s and returns a *SizeFloorError when maxBytes is
// under the floor pruning cannot go under.
func sizeOverFloor(ctx context.Context, s *store.Store, maxBytes int64) (store.SizeReport, error) {
	size, err := s.MeasureSize(ctx)
	if err != nil {
		return size, fmt.Errorf("worker: %w", err)
	}
	if maxBytes < size.FloorBytes {
		return size, &SizeFloorError{Limit: maxBytes, Floor: size.FloorBytes}
	}
	return size, nil
}

// formatSize writes n bytes in the units --max-db-size takes (K = 1024),
// rounded up to one decimal so that the figure can be used as a limit.
func formatSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	v, unit := float64(n), -1
	for v >= 1024 && unit < 3 {
		v /= 1024
		unit++
	}
	return strconv.FormatFloat(math.Ceil(v*10)/10, 'f', -1, 64) + string("KMGT"[unit])
}

// processRecord is what the process records of itself (memoryd_processes).
func (w *Worker) processRecord() store.ProcessRecord {
	r := store.ProcessRecord{EmbedModel: w.embedModel()}
	if !w.cfg.EmbedOnly {
		r.Extractor = ExtractorID(w.cfg.Extractor.Info())
	}
	return r
}

// ExtractorID names an extractor for memoryd_processes: "rules", or "llm"
// and the model. The prompt version is left out: two releases of a rolling
// upgrade extract alike enough.
func ExtractorID(info extractor.Info) string {
	return strings.TrimSpace(info.Name + " " + info.Model)
}

// embedModel is the model this process embeds with, "" when embedding is
// off.
func (w *Worker) embedModel() string {
	if w.cfg.Embedder == nil {
		return ""
	}
	return w.cfg.Embedder.Model()
}

// defaultProcessTimeout is Config.ProcessTimeout's default, at the default
// HeartbeatInterval.
const defaultProcessTimeout = 10 * time.Second
