// Command serve runs the local embedding models (package localembed) as an
// OpenAI-compatible embeddings endpoint until interrupted:
//
//	go -C tools run ./localembed/serve -port 8091
//	memoryd serve --embed-base-url http://127.0.0.1:8091/v1 --embed-model use-lite
//
// For trying and measuring hybrid retrieval where no model server can run;
// a deployment uses a real one (Ollama, vLLM, TEI, OpenAI).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/memoryd/memoryd/tools/localembed"
)

func main() {
	port := flag.Int("port", 8091, "port to listen on, on 127.0.0.1 (0: any free port)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := localembed.Start(ctx, *port, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	fmt.Printf("embeddings at %s, models %s\n", s.BaseURL, strings.Join(localembed.Models, ", "))
	<-ctx.Done()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}
