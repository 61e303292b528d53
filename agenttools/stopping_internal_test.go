package agenttools

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestStoppingSaysWhatWasDone: a call cut by the stop is told whether
// memoryd may have done it: nothing when it was cut waiting its turn or
// when memoryd's last reply refused it as overloaded (the stop cut the
// pause before the next try: before, it was told a change "may or may
// not have been made"), maybe when it had been sent, also when it is a
// later call of the tool refused after an earlier one changed memory
// (clear_fact's second clear); a call not cut by the stop is left alone.
func TestStoppingSaysWhatWasDone(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	stopped, cancel := context.WithCancelCause(context.Background())
	cancel(errStopping)
	overloaded := fmt.Errorf("set fact: %w", &events.ServiceError{Code: 500, Description: events.OverloadedDescription})
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		sent bool
		says string // "" for no error
	}{
		{"cut waiting its turn", stopped, errStopping, false, "nothing was asked"},
		{"cut in flight", stopped, context.Canceled, true, "may or may not have been made"},
		{"cut in the pause after an overloaded refusal", stopped, overloaded, true, "nothing was done"},
		{"cut in the pause after a later call's overloaded refusal", stopped, afterAChange{overloaded}, true, "may or may not have been made"},
		{"not stopping", context.Background(), overloaded, true, ""},
	} {
		err := s.stopping(c.ctx, c.err, "set_fact", "alice", c.sent)
		if c.says == "" {
			if err != nil {
				t.Errorf("%s: %v; want no stop error", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.says)
		}
	}
}
