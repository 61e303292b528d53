package extractor

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// cutter accepts connections and closes each once a request's head has
// come, answering nothing: a server (or a proxy) that cut the request.
// With down, it closes its listener first: a server that went down with
// the request.
func cutter(t *testing.T, down bool) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				if down {
					_ = ln.Close()
				}
			}()
		}
	}()
	return ln
}

// refusedAddr is an address of this host nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestCutThroughAProxyIsNotACrash: a request sent through an HTTP proxy
// (HTTP_PROXY, HTTPS_PROXY) that the proxy cuts says nothing of the model
// server, and neither does a connection to the server's address made
// without the proxy (refused or dropped by a firewall that only the proxy
// passes, a name only the proxy resolves): it is not taken for a crash the
// request brought about (IsCrashed). Before, every cut through such a
// proxy was, and a turn cut twice (a proxy's read timeout on a slow
// model) failed for good as one that crashes the server.
func TestCutThroughAProxyIsNotACrash(t *testing.T) {
	proxy := cutter(t, false)
	proxyURL, err := url.Parse("http://" + proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLLM(LLMConfig{BaseURL: "http://" + refusedAddr(t) + "/v1", Model: "m", MaxProbeGap: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Extract(context.Background(), testInput("I'm Ana"))
	if err == nil || IsUnreachable(err) || IsCrashed(err) {
		t.Fatalf("Extract through a proxy that cut the request: %v (crashed %v, unreachable %v); want a connection error, neither",
			err, IsCrashed(err), IsUnreachable(err))
	}

	// The control: the same cut by the server itself, its address then
	// refusing connections, is a crash.
	srv := cutter(t, true)
	l, err = NewLLM(LLMConfig{BaseURL: "http://" + srv.Addr().String() + "/v1", Model: "m", MaxProbeGap: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = l.Extract(context.Background(), testInput("I'm Ana")); !IsCrashed(err) {
		t.Fatalf("Extract cut by a server that then refuses connections: %v; want it crashed", err)
	}
}

// TestAloneRequestGoesBeforeLaterOnes: a request sent alone (Alone) that
// waits for the slots of the requests in flight gets each as it frees;
// the requests made meanwhile wait behind it, not beside it. Before, they
// took the slots it waited for (a channel's waiters are served in turn,
// and it queued again for each slot): with requests coming all the time,
// it waited as long as they kept coming, holding the slots it had idle.
func TestAloneRequestGoesBeforeLaterOnes(t *testing.T) {
	t.Parallel()
	const limit = 2
	var (
		mu    sync.Mutex
		order []string
	)
	entered := make(chan string, 8)
	release := make(map[string]chan struct{})
	for _, m := range []string{"first-a", "first-b", "alone", "later-a", "later-b"} {
		release[m] = make(chan struct{})
	}
	var released sync.Map
	free := func(m string) {
		if _, done := released.LoadOrStore(m, true); !done {
			close(release[m])
		}
	}
	srv := extractortest.NewServer(t)
	// Before the server closes (cleanups run last first): a test that
	// failed with requests held in the handler would otherwise hang.
	t.Cleanup(func() {
		for m := range release {
			free(m)
		}
	})
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		var marker string
		for _, msg := range req.Messages {
			for m := range release {
				if strings.Contains(msg.Content, "marker "+m+".") {
					marker = m
				}
			}
		}
		mu.Lock()
		order = append(order, marker)
		mu.Unlock()
		entered <- marker
		if ch := release[marker]; ch != nil {
			<-ch
		}
		return extractortest.Content(validReply)
	})
	l := newTestLLM(t, srv, func(c *LLMConfig) { c.MaxConcurrency = limit })
	waiting := make(chan struct{}, 8)
	l.waitingForSlot = func() { waiting <- struct{}{} }

	errs := make(chan error, 5)
	send := func(ctx context.Context, marker string) {
		go func() {
			_, err := l.Extract(ctx, testInput("I'm Ana, marker "+marker+"."))
			errs <- err
		}()
	}
	deadline := time.After(testDeadline)
	await := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
	enteredAs := func(want string) {
		t.Helper()
		select {
		case got := <-entered:
			if got != want {
				t.Fatalf("request %q reached the server, want %q next", got, want)
			}
		case <-deadline:
			t.Fatalf("gave up waiting for request %q", want)
		}
	}
	send(context.Background(), "first-a")
	enteredAs("first-a")
	send(context.Background(), "first-b")
	enteredAs("first-b")
	send(Alone(context.Background()), "alone")
	gathering, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() {
		// Until the alone request holds solo and waits for slots.
		for l.gathering.Load() == nil {
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
		close(gathering)
	}()
	await("the alone request to gather the slots", gathering)
	send(context.Background(), "later-a")
	send(context.Background(), "later-b")
	await("a later request to wait", waiting)
	await("the other later request to wait", waiting)

	free("first-a")
	free("first-b")
	enteredAs("alone")
	free("alone")
	free("later-a")
	free("later-b")
	for range 5 {
		if err := <-errs; err != nil {
			t.Errorf("Extract: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 5 || order[2] != "alone" {
		t.Errorf("requests reached the server in the order %v, want the alone one third", order)
	}
}

// TestCrashCountsTheServerDown: a request the server went down with
// (Crashed) counts the server as down (Down), though its error is not
// Unreachable, so that the worker wakes no job waiting for it into the
// restart; a request cut by a server that still accepts connections (an
// idle timeout, a balancer) does not. Before, only a later request
// refused did, and a process with none to send woke its waiting jobs into
// the dead server.
func TestCrashCountsTheServerDown(t *testing.T) {
	t.Parallel()
	for _, down := range []bool{false, true} {
		srv := cutter(t, down)
		l, err := NewLLM(LLMConfig{BaseURL: "http://" + srv.Addr().String() + "/v1", Model: "m",
			HTTPClient: &http.Client{Transport: &http.Transport{}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Extract(context.Background(), testInput("I'm Ana"))
		if IsCrashed(err) != down || IsUnreachable(err) {
			t.Fatalf("cut, server refusing after it %v: %v (crashed %v, unreachable %v); want crashed %v, not unreachable", down, err, IsCrashed(err), IsUnreachable(err), down)
		}
		if l.Down() != down {
			t.Errorf("cut, server refusing after it %v: Down %v, want %v", down, l.Down(), down)
		}
	}
}
