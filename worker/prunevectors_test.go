package worker_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// embedAll saves a random 768-dimension vector of model for every context
// item, as the embed jobs would.
func embedAll(t *testing.T, s *store.Store, model string, seed uint64) {
	t.Helper()
	ctx := context.Background()
	rows, _ := s.Pool().Query(ctx, `SELECT id, content_hash FROM context ORDER BY id`)
	type item struct {
		id   int64
		hash []byte
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (item, error) {
		var it item
		err := r.Scan(&it.id, &it.hash)
		return it, err
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var ws []store.EmbeddingWrite
	for _, it := range items {
		v := make([]float32, 768)
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		ws = append(ws, store.EmbeddingWrite{ContextID: it.id, ContentHash: it.hash, Dims: len(v), Vector: embedding.Encode(v)})
	}
	if n, err := s.SaveEmbeddings(ctx, model, ws); err != nil || n != int64(len(ws)) {
		t.Fatalf("saved %d of %d vectors: %v", n, len(ws), err)
	}
}

// The size limit counts vectors at their live size and spends the space of
// vectors that serve nothing before any memory: after a model change the
// old model's vectors stay behind (no query of the new model reads them),
// and a re-embed with the same model (`embed --backfill --dims`) leaves a
// dead version of every vector. Both had counted as memory for good: a
// race review saw 81 and 76 of 900 items deleted under a limit the same
// 900 items, with one vector each, fit under.
func TestPruneKeepsMemoryOverVectorsThatServeNothing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		embedAgain string // the model embedding every item again
		oldRuns    bool   // a worker process of m1 still runs (a rolling change)
	}{
		{"a new model", "m2", false},
		{"the same model again", "m1", false},
		{"a new model while the old one still runs", "m2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// A database of its own: Postgres's statistics of dead rows
			// are the test's premise, and no other test's snapshot may
			// keep them from a VACUUM.
			s := storetest.Open(t, storetest.Database(t))
			noAutovacuum(t, s)
			seedContext(t, s, []string{"alice", "bob", "carol"}, 300)
			embedAll(t, s, "m1", 1)
			if err := s.VacuumContext(ctx); err != nil {
				t.Fatal(err)
			}
			before, err := s.MeasureSize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			limit := before.LiveBytes + before.ContextLiveBytes()/20
			embedAll(t, s, tc.embedAgain, 2)
			if tc.embedAgain == "m1" {
				waitStat(t, s, "900 dead vector rows", `SELECT pg_stat_get_dead_tuples('context_embeddings'::regclass) >= 900`)
			}
			if tc.oldRuns {
				if err := s.RegisterProcess(ctx, "old-release", store.ProcessRecord{EmbedModel: "m1"}); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, EmbedModel: tc.embedAgain})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Before.RealBytes < before.RealBytes+before.VectorBytes/2 {
				t.Fatalf("the files grew from %d to %d bytes only: the test's premise (a second vector of every item) does not hold", before.RealBytes, rep.Before.RealBytes)
			}
			if tc.oldRuns {
				// Its vectors serve its queries: kept, and the memory
				// pays for them as for any live data.
				var m1 int
				if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_embeddings WHERE model = 'm1'`).Scan(&m1); err != nil {
					t.Fatal(err)
				}
				if rep.VectorsRemoved != 0 || int64(m1) != 900-rep.RemovedForSize || rep.RemovedForSize == 0 {
					t.Fatalf("with a process of m1 running: %d vectors removed (%d m1 left) and %d items; want no vector but those of the items removed, and some items", rep.VectorsRemoved, m1, rep.RemovedForSize)
				}
				return
			}
			if rep.RemovedForSize != 0 {
				t.Fatalf("removed %d of 900 items for a limit of %d the same memory fit under (live %d before; now real %d, estimated live %d, vectors %d live in %d rows)",
					rep.RemovedForSize, limit, before.LiveBytes, rep.Before.RealBytes, rep.Before.LiveBytes, rep.Before.VectorBytes, rep.Before.VectorRows)
			}
			var m1, m2 int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE model = 'm1'), count(*) FILTER (WHERE model = 'm2') FROM context_embeddings`).Scan(&m1, &m2); err != nil {
				t.Fatal(err)
			}
			want := map[string][2]int{"m1": {900, 0}, "m2": {0, 900}}[tc.embedAgain]
			if m1 != want[0] || m2 != want[1] {
				t.Fatalf("vectors left: m1 %d, m2 %d; want m1 %d, m2 %d", m1, m2, want[0], want[1])
			}
			if got := map[bool]int64{true: 900}[tc.embedAgain == "m2"]; rep.VectorsRemoved != got {
				t.Fatalf("report: %d vectors of other models removed; want %d", rep.VectorsRemoved, got)
			}
		})
	}
}
