package worker_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// minParallel is the fewest tests of this package go test runs at once
// unless -parallel is given. Every test here calls t.Parallel (setup), and
// most spend their time waiting: on a model server that is down for a
// second, a probe, a retry's backoff, a JetStream redelivery, Postgres's
// statistics. At go test's default, GOMAXPROCS (2 on the project's
// machines), the package took 182 s alone with 93 s of CPU between the
// test process and Postgres; at 4, 115 s with the same CPU and at most 27
// Postgres connections (each test's pool holds 4). More did not help: at
// 8, 125 s and twice the connections.
const minParallel = 4

func TestMain(m *testing.M) {
	raiseParallel()
	os.Exit(m.Run())
}

// raiseParallel lifts go test's -parallel to minParallel, unless it was
// given or GOMAXPROCS is already above it (the default then, as before).
func raiseParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < minParallel {
		_ = flag.Set("test.parallel", strconv.Itoa(minParallel))
	}
}
