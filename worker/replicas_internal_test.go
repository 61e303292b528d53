package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStreamsBesideTheTurnStreamTakeItsReplicas: in a 3-node JetStream
// cluster whose turn stream an operator made with 3 replicas (as
// docs/operations.md says), the dead-letter stream and the forgets bucket
// memoryd creates get 3 too. A cluster walk found both at 1: their one
// node down stopped every serve's start ("dead-letter stream: context
// deadline exceeded") and held dead letters and forgets back.
func TestStreamsBesideTheTurnStreamTakeItsReplicas(t *testing.T) {
	t.Parallel()
	routes := []int{eventstest.FreePort(t), eventstest.FreePort(t), eventstest.FreePort(t)}
	var all []string
	for _, r := range routes {
		all = append(all, fmt.Sprintf("nats://127.0.0.1:%d", r))
	}
	var urls []string
	for i, r := range routes {
		dir := t.TempDir()
		urls = append(urls, eventstest.PrivateServer(t, func(port int) []string {
			return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir, "-n", fmt.Sprintf("n%d", i+1),
				"--cluster_name", "memoryd-test", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", r), "--routes", strings.Join(all, ",")}
		}))
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const stream, prefix = "TURNS_R3", "r3"
	// The cluster elects its JetStream leader first.
	eventstest.Eventually(t, "the cluster to create a stream of 3 replicas", time.Minute, func() (bool, string) {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{events.TurnSubjects(prefix)}, Replicas: 3})
		return err == nil, fmt.Sprint(err)
	})
	w, err := New(Config{Conn: js.Conn(), Store: storetest.New(t), Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	if created, err := w.ensureDeadLetterStream(ctx); err != nil || !created {
		t.Fatalf("dead-letter stream: created %v, %v", created, err)
	}
	dls, err := js.Stream(ctx, w.cfg.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := dls.CachedInfo().Config.Replicas; n != 3 {
		t.Errorf("dead-letter stream: %d replicas, want 3 (the turn stream's)", n)
	}
	if _, err := putForget(ctx, js, stream, store.Tombstone{UserToken: "alice-token", ForgottenAt: time.Now()}, false, 0); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, ForgetsBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; n != 3 {
		t.Errorf("forgets bucket: %d replicas, want 3 (the turn stream's)", n)
	}
}
