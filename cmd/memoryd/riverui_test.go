package main

import (
	"context"
	"strings"
	"testing"
)

// TestRiverUIFlagsRefused: serve refuses River's UI without credentials,
// with half a basic auth pair or without --http, naming the flags, before
// it connects to anything (exit 2).
func TestRiverUIFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--riverui", "--http", "127.0.0.1:0"}, "--riverui-token or --riverui-user and --riverui-password are required with --riverui"},
		{[]string{"--riverui", "--http", "127.0.0.1:0", "--riverui-user", "ops"}, "--riverui-password is required with --riverui-user"},
		{[]string{"--riverui", "--riverui-token", "t"}, "--http is required with --riverui"},
		{[]string{"--riverui", "--http", "127.0.0.1:0", "--riverui-token", "t", "--riverui-path", "/metrics"}, "--riverui-path \"/metrics/\" overlaps /metrics"},
	} {
		_, errOut, code := runArgs(context.Background(), append([]string{"serve"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
