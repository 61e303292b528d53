package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/memoryd/memoryd/events"
)

// historyOptions are the flags of `memoryd facts history`.
type historyOptions struct {
	maxResults int
	before     int
}

func (h *historyOptions) register(f *flags) {
	f.ArgInt(&h.maxResults, "max-results", events.DefaultHistoryResults, fmt.Sprintf("history: most changes shown (1..%d)", events.MaxHistoryResults))
	f.ArgInt(&h.before, "before", 0, "history: show the changes older than the change with this id (0: from the newest)")
}

// run prints one page of a fact's history: a line per change, newest first,
// then on stderr how to read the older ones.
func (h *historyOptions) run(ctx context.Context, a *cli, c *events.Client, o clientOptions, key string) error {
	reply, err := c.FactHistory(ctx, events.FactHistoryRequest{UserID: o.user, Key: key, MaxResults: &h.maxResults, Before: int64(h.before)})
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(a.stdout, reply)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	for _, ch := range reply.Changes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", ch.ID, shownTime(ch.ChangedAt), ch.Op, changeValues(ch), changeSource(ch))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "%d change(s)\n", len(reply.Changes))
	if reply.NextBefore != 0 {
		fmt.Fprintf(a.stderr, "older changes: add --before %d\n", reply.NextBefore)
	}
	return nil
}

// changeValues reads "old -> new", "new" for a first value, and
// "old -> (cleared)" for a clear.
func changeValues(ch events.FactChange) string {
	n := "(cleared)"
	if ch.NewValue != nil {
		n = *ch.NewValue
	}
	if ch.OldValue == nil {
		return n
	}
	return *ch.OldValue + " -> " + n
}

// changeSource says where the new value came from and when it was stated;
// "" for a clear.
func changeSource(ch events.FactChange) string {
	if ch.SourceAt.IsZero() {
		return ""
	}
	src := "set directly"
	if ch.EventID != "" {
		src = "turn " + ch.EventID
	}
	if ch.ConversationID != "" {
		src += ", conversation " + ch.ConversationID
	}
	return src + ", stated " + shownTime(ch.SourceAt)
}
