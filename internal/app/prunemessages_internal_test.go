package app

import (
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestPruneNotMigratedCountsInTheRightNumber: prune's refusal of a
// database not migrated to this release counts River's and memoryd's
// pending migrations together, "1 migration" for one. Before, "(1
// migrations pending)".
func TestPruneNotMigratedCountsInTheRightNumber(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pending store.Pending
		want    string
	}{
		{store.Pending{Memoryd: []string{"073_chunk_vectors_checked.sql"}}, "(1 migration pending)"},
		{store.Pending{River: []string{"river 6"}}, "(1 migration pending)"},
		{store.Pending{River: []string{"river 6"}, Memoryd: []string{"073_chunk_vectors_checked.sql"}}, "(2 migrations pending)"},
		{store.Pending{Memoryd: []string{"072_document_chunking.sql", "073_chunk_vectors_checked.sql"}}, "(2 migrations pending)"},
	} {
		if got := pruneNotMigrated(tt.pending).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("pending %+v: %q; want it to say %q", tt.pending, got, tt.want)
		}
	}
}
