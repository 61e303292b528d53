package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEmbedRefusalSaveFailingKeepsTheVectors: a job whose record of a
// refused text fails (here a trigger refusing the first write to
// embedding_refusals) keeps the vectors the server already answered: its
// retry sends only the refused text again. Before, the failed record
// returned before the vectors were saved, and the retry sent (and paid
// for) every text of the job again.
func TestEmbedRefusalSaveFailingKeepsTheVectors(t *testing.T) {
	e := setup(t)
	url := storetest.Migrated(t)
	e.store = storetest.Open(t, url)
	admin, err := pgx.Connect(e.ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(e.ctx, `
CREATE SEQUENCE refusal_writes;
CREATE FUNCTION refusal_fails() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- nextval is not rolled back with the failed write's transaction
	IF nextval('refusal_writes') <= 1 THEN
		RAISE EXCEPTION 'refusal write failed for the test';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refusal_fails BEFORE INSERT OR UPDATE ON embedding_refusals FOR EACH ROW EXECUTE FUNCTION refusal_fails();`); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "alice", Question: "my canine companion", Answer: "Rex", CreatedAt: t0},
		{UserID: "alice", Question: "a pasted log", Answer: "POISON", CreatedAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 3); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedJobsOver()
	var writes int64
	if err := admin.QueryRow(e.ctx, `SELECT last_value FROM refusal_writes`).Scan(&writes); err != nil || writes < 2 {
		t.Fatalf("refusal writes tried: %d (%v), want the failed one and its retry's", writes, err)
	}
	if c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || c != (store.EmbeddingCount{Items: 2, Embedded: 1, Refused: 1}) {
		t.Errorf("count %+v (%v), want 1 embedded, 1 refused", c, err)
	}
	rex := 0
	for _, in := range srv.Inputs() {
		if strings.Contains(in, "Rex") {
			rex++
		}
	}
	for i, in := range srv.Sent() {
		t.Logf("request %d: %q", i+1, in)
	}
	// One run sends it twice (alone by the batch's probe, then in its
	// half); the retry after the failed record should not send it again.
	if rex > 2 {
		t.Errorf("the embedded text was answered %d times, want at most 2, those of one run: its vector was received before the refusal's record failed", rex)
	}
}
