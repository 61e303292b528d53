package apikeys_test

import (
	"testing"

	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/events"
)

// The key file's user id limit is the service's.
func TestMaxUserIDBytesIsTheService(t *testing.T) {
	if apikeys.MaxUserIDBytes != events.MaxUserIDBytes {
		t.Fatalf("apikeys.MaxUserIDBytes = %d, events.MaxUserIDBytes = %d", apikeys.MaxUserIDBytes, events.MaxUserIDBytes)
	}
}
