// Command testnats builds the nats-server releases some tests run on
// besides the machine's (eventstest.ReleaseCompose and ReleaseNewest),
// before `make test` runs the suite, into the user's cache directory where
// the tests look for them. Built by the first test that needs one, a fresh
// machine's build (`go install` through the Go module proxy; up to 6
// minutes at a load of 20 on 2 cores) counted against that test package's
// timeout. A release already built is not built again.
//
//	go run ./scripts/testnats
package main

import (
	"fmt"
	"os"

	"github.com/memoryd/memoryd/events/eventstest"
)

func main() {
	for _, v := range []string{eventstest.ReleaseCompose, eventstest.ReleaseNewest} {
		if _, err := eventstest.BuildRelease(v); err != nil {
			fmt.Fprintf(os.Stderr, "The tests need nats-server %s, built with `go install github.com/nats-io/nats-server/v2@%s`, which failed (it needs the Go module proxy): %v\n", v, v, err)
			os.Exit(1)
		}
	}
}
