package enricher

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestLaneFloodingUsersLeaveRoom: two users each send more requests than
// they may have worked on, filling the lane's slots and their own turn
// waits; a third user's request is not refused for it: it waits for a
// slot and is served once one frees (the turn waits and the slot wait are
// counted apart). Past a user's own bound, that user is refused at once.
func TestLaneFloodingUsersLeaveRoom(t *testing.T) {
	t.Parallel()
	s := &Service{}
	l := newLane(8, 4)
	release := make(chan struct{})
	var served, refused sync.Map
	var wg sync.WaitGroup
	send := func(user string, i int) {
		wg.Add(1)
		key := fmt.Sprintf("%s-%d", user, i)
		s.dispatch(l, user, time.Now().Add(time.Minute), nil, func() {
			defer wg.Done()
			<-release
			served.Store(key, true)
		}, func() {
			defer wg.Done()
			refused.Store(key, true)
		})
	}
	for i := range 21 { // 4 worked on, 16 waiting for their turn, 1 refused
		send("a", i)
		send("b", i)
	}
	send("c", 0)
	count := func(m *sync.Map) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := count(&refused); n != 2 {
		t.Fatalf("%d requests refused before any slot freed, want 2 (a's and b's 21st)", n)
	}
	if _, ok := refused.Load("c-0"); ok {
		t.Fatal("user c's first request was refused while only a and b flooded the lane")
	}
	close(release)
	wg.Wait()
	if _, ok := served.Load("c-0"); !ok {
		t.Fatal("user c's request was not served")
	}
	if n := count(&served); n != 41 {
		t.Fatalf("%d served, want 41", n)
	}
}
