package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
)

// demoTurns is a short conversation with a few self-statements. Event ids are
// fixed, so running the demo again changes nothing: JetStream and the turns
// table both deduplicate on them.
var demoTurns = []struct{ user, assistant string }{
	{"Hi! My name is Ada and I live in Lisbon.", "Nice to meet you, Ada! Lisbon is lovely."},
	{"I work as a marine biologist, mostly on octopus cognition.", "That sounds fascinating. Octopuses are remarkable problem solvers."},
	{"My favorite food is grilled sardines.", "A classic Lisbon choice, especially in June during the festas."},
	{"What's a good name for my new sailboat?", "How about 'Cephalopod', given your work? Or 'Sardinha' for your favourite food."},
	{"I prefer short answers, by the way.", "Noted: short answers from now on."},
}

func runDemo(ctx context.Context, a *cli, args []string) error {
	var (
		o    serveOptions
		user string
		wait time.Duration
	)
	f := newFlags("demo", `Usage: memoryd demo [flags]

Runs memoryd end to end on the local defaults: starts the service in this
process, publishes a short conversation as turn events, waits until they are
processed, then prints the facts and context stored and an example enrich
reply. Safe to run again.`)
	o.register(f)
	f.ArgString(&user, "user", "demo-ada", "user id the demo conversation belongs to")
	f.ArgDuration(&wait, "wait", time.Minute, "how long to wait for the turns to be processed")
	if err := f.Parse(args); err != nil {
		return err
	}
	if o.conn.logLevel == "info" {
		o.conn.logLevel = "warn" // keep the walk-through readable
	}
	svc, _, err := o.newApp(f, a, "memoryd-demo")
	if err != nil {
		return err
	}
	cfg := svc.Config()
	out := a.stdout
	fmt.Fprintf(out, "memoryd demo\n  postgres: %s\n  nats:     %s\n", app.RedactURL(cfg.Store.URL), app.RedactURL(cfg.NATS.URL))
	if cfg.LLM.BaseURL == "" {
		fmt.Fprintln(out, "  extractor: offline rules (turns stored verbatim + simple self-statements; set MEMORYD_LLM_BASE_URL for a model)")
	} else {
		fmt.Fprintf(out, "  extractor: LLM %s at %s\n", cfg.LLM.Model, app.RedactURL(cfg.LLM.BaseURL))
	}

	fmt.Fprintln(out, "\n1. starting memoryd (migrations, ingest consumer, workers, enrich service)")
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Stop(stopCtx)
	}()
	if err := svc.Start(ctx); err != nil {
		return startErr(err)
	}

	fmt.Fprintf(out, "2. publishing %d turns for user %q to %s\n", len(demoTurns), user, events.TurnSubject(cfg.Prefix, user))
	nc, err := svc.Conn()
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pub := events.NewPublisher(js, cfg.Prefix)
	base := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	for i, t := range demoTurns {
		_, err := pub.Publish(ctx, events.Turn{
			ID:                fmt.Sprintf("%s-turn-%d", user, i+1),
			UserID:            user,
			ConversationID:    user + "-conv-1",
			UserMessage:       t.user,
			AssistantResponse: t.assistant,
			Timestamp:         base.Add(time.Duration(i) * 3 * time.Minute),
		})
		if err != nil {
			return err
		}
	}

	fmt.Fprint(out, "3. waiting for extraction")
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := svc.WaitProcessed(waitCtx, user, len(demoTurns), func(done int) { fmt.Fprintf(out, " %d/%d", done, len(demoTurns)) }); err != nil {
		fmt.Fprintln(out)
		return err
	}
	fmt.Fprintln(out, " done")

	s, err := svc.Store(ctx)
	if err != nil {
		return err
	}
	facts, err := s.Facts(ctx, user, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nfacts about %s (%d):\n", user, len(facts))
	for _, f := range facts {
		fmt.Fprintf(out, "  %-16s %s\n", f.Key, f.Value)
	}
	items, err := s.RecentContext(ctx, user, 10)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\ncontext (%d items, newest first):\n", len(items))
	for _, it := range items {
		fmt.Fprintf(out, "  [%s] Q: %s\n      A: %s\n", shownTime(it.CreatedAt), it.Question, it.Answer)
	}

	question := "Can you suggest a dinner recipe with sardines?"
	fmt.Fprintf(out, "\n4. enrich request for a new message: %q\n", question)
	reply, err := events.NewClient(nc, cfg.Prefix).Enrich(ctx, events.EnrichRequest{UserID: user, Message: question})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   keywords: %v   took: %.2f ms   degraded: %v\n   injection appended to the message:\n\n%s\n",
		reply.Keywords, reply.TookMS, reply.Degraded, indent(reply.Injection, "     "))
	// As README's "Running it" writes it: make demo installs no binary.
	fmt.Fprintf(out, "\nTry it yourself from the repository, while 'go run ./cmd/memoryd serve' runs in another terminal:\n  go run ./cmd/memoryd enrich --user %s \"what should I cook tonight?\"\n", user)
	return nil
}

func indent(s, prefix string) string {
	if s == "" {
		return prefix + "(nothing relevant)"
	}
	out := prefix
	for _, r := range s {
		out += string(r)
		if r == '\n' {
			out += prefix
		}
	}
	return out
}
