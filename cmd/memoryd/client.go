package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
)

// clientCommands are the commands that talk to a running memoryd over NATS
// request-reply (enrich, facts, memory, stats, language).
func clientCommands() []command {
	return []command{
		{"enrich", "print the memory injection for a message (what a frontend appends)", runEnrich},
		{"facts", "list, set, get or clear a user's facts, or show a fact's history", runFacts},
		{"memory", "search, store or clear a user's remembered context", runMemory},
		{"stats", "show a user's memory and ingestion counters", runStats},
		{"export", "write a user's memory as JSON lines", runExport},
		{"import", "merge an export into a user's memory", runImport},
		{"language", "show or set a user's language (how their memory is searched)", runLanguage},
	}
}

// clientOptions are the flags every client command has.
type clientOptions struct {
	conn    connOptions
	user    string
	json    bool
	timeout time.Duration
	// perRequest makes --timeout bound each request rather than the
	// command (export and import: as many requests as the memory needs).
	perRequest bool
	// nc is the connection client made, for callError to ask what the
	// server refused.
	nc *nats.Conn
	// changes is set by an action that changes memory: how to tell
	// whether its request, unanswered within --timeout, was done.
	changes string
}

func (o *clientOptions) register(f *flags) { o.registerTimeout(f, 5*time.Second) }

// registerTimeout is register with another default --timeout, for a
// request memoryd may take longer over.
func (o *clientOptions) registerTimeout(f *flags, timeout time.Duration) {
	o.conn.register(f)
	// Kept, so that one memoryd.yaml, set of variables or command line
	// serves every command, but said to be idle.
	f.Lookup("database-url").Usage = "not used: this command talks to memoryd over NATS only"
	f.ArgString(&o.user, "user", "", "user id (required)")
	f.ArgBool(&o.json, "json", false, "print the whole JSON reply")
	f.Duration(&o.timeout, "timeout", timeout, "how long to wait for memoryd's reply")
}

// parse parses flags placed anywhere among the arguments (so that
// `memoryd facts set k v --user U` works) and returns the positional ones.
// Everything after "--" is positional.
func (o *clientOptions) parse(f *flags, args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			return nil, err
		}
		rest := f.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if o.user == "" {
		return nil, f.usageErr("--user is required")
	}
	if o.timeout <= 0 {
		return nil, f.usageErr("--timeout %s is out of range: it must be positive", o.timeout)
	}
	return pos, nil
}

// client connects to NATS and returns a client and a context bounded by
// --timeout (with perRequest, a client whose every request is); call done
// when finished.
func (o *clientOptions) client(ctx context.Context, a *cli) (c *events.Client, reqCtx context.Context, done func(), err error) {
	logger, err := o.conn.logger(a)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := o.conn.connectNATS("memoryd-cli", logger)
	if err != nil {
		return nil, nil, nil, err
	}
	o.nc = nc
	// A permissions violation ends the request at once; callError says
	// what was refused.
	reqCtx, cancelRefused := endOnRefusal(ctx, nc)
	cancel := context.CancelFunc(func() {})
	if !o.perRequest {
		// Otherwise --timeout bounds each request, which the client applies.
		reqCtx, cancel = context.WithTimeout(reqCtx, o.timeout)
	}
	c = events.NewClient(nc, o.conn.prefix)
	if o.perRequest {
		c = c.WithRequestTimeout(o.timeout)
	}
	return c, reqCtx, func() { cancel(); cancelRefused(); nc.Close() }, nil
}

// callError rewrites the errors of a request to the service into one
// sentence: the client's own errors start with "memoryd <endpoint>:", which
// run's "memoryd <command>:" would otherwise repeat.
func (o *clientOptions) callError(err error) error {
	var (
		svcErr  *events.ServiceError
		inErr   *events.InputError
		textErr *events.TextError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no memoryd service answers on %s under prefix %q: start 'memoryd serve' (the default role, or --role enrich: a serve of --role ingest answers none) with the same --nats-url and --prefix", app.RedactURL(o.conn.nats.URL), o.conn.prefix)
	case errors.Is(err, nats.ErrMaxPayload):
		limit := "its max_payload"
		if o.nc != nil {
			limit = fmt.Sprintf("its max_payload of %d bytes", o.nc.MaxPayload())
		}
		return fmt.Errorf("the request is larger than the NATS server takes (%s): split it, or raise max_payload in the server's configuration (memoryd's own limits are in docs/protocol.md)", limit)
	case errors.Is(err, context.Canceled) && refusedByServer(o.nc) != nil:
		// Ended by the permissions violation (client's error handler).
		return refusedByServer(o.nc)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		if perr := refusedByServer(o.nc); perr != nil {
			return perr
		}
		if o.changes != "" {
			// memoryd goes on with a request whose caller stopped
			// waiting: the write may commit after this exit.
			return fmt.Errorf("memoryd did not reply within %s (--timeout): the change may have been made (or may still be made); %s", o.timeout, o.changes)
		}
		return fmt.Errorf("memoryd did not reply within %s (--timeout)", o.timeout)
	case errors.As(err, &inErr):
		// The input is not an export: a bad argument, as a line the
		// service refuses is (exit 2).
		return &usageError{cmd: o.conn.cmd, err: fmt.Errorf("%s", strings.TrimPrefix(inErr.Error(), "memoryd "+o.conn.cmd+": ")), input: true}
	case errors.As(err, &textErr):
		// An argument or a file's text is not UTF-8: refused before it is
		// sent, as the service would refuse it (exit 2).
		return &usageError{cmd: o.conn.cmd, err: fmt.Errorf("the request's %s is not valid UTF-8", textErr.Field)}
	case errors.As(err, &svcErr) && svcErr.Code == 400:
		// The request was refused as malformed: an argument is bad (exit 2),
		// or an import file's line (events.Client.Import names it), which
		// the flags' usage would not help with.
		line := o.conn.cmd == "import" && strings.HasPrefix(svcErr.Description, "line ")
		return &usageError{cmd: o.conn.cmd, err: fmt.Errorf("the service refused the request (400): %s", svcErr.Description), input: line}
	case errors.As(err, &svcErr):
		return fmt.Errorf("the service answered %d: %s", svcErr.Code, svcErr.Description)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "memoryd "); ok {
		// "memoryd import: import: line 1" when the endpoint is the command.
		msg = strings.TrimPrefix(msg, o.conn.cmd+": ")
		return &relabeled{msg: msg, err: err}
	}
	return err
}

// refusedByServer says what the NATS server refused on nc, or returns nil.
// A request the server's permissions refuse (publishing it, or the reply
// inbox's subscription) is dropped, not answered: the requester only times
// out, and nc's last error is what tells it from a memoryd that is down.
func refusedByServer(nc *nats.Conn) error {
	if nc == nil {
		return nil
	}
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	// Only the reply's subscription refused: the request went out, and
	// memoryd may have done it (a publish stored, a fact set).
	if strings.Contains(err.Error(), "Subscription to") && strings.Contains(err.Error(), "_INBOX") {
		if prefix := nc.Opts.InboxPrefix; prefix != "" {
			// A prefix given, and refused: a frontend's left in the
			// environment of memoryd's own credential, or another
			// frontend's (a TLS walk: the advice to give the frontend's
			// prefix was wrong there).
			return &refusal{sent: true, err: fmt.Errorf("the request was sent, and memoryd may have carried it out, but the NATS server refused this credential the reply's inbox under the inbox prefix %s (%w): this credential may not subscribe there; give the prefix it may (a frontend's own, e.g. _INBOX_alice_frontend, or none for memoryd's own credential) with --inbox-prefix or MEMORYD_INBOX_PREFIX before sending it again; see docs/protocol.md, \"Reply subjects\"", prefix, err)}
		}
		return &refusal{sent: true, err: fmt.Errorf("the request was sent, and memoryd may have carried it out, but the NATS server refused this credential the reply's inbox (%w): give the frontend's inbox prefix with --inbox-prefix (e.g. _INBOX_alice_frontend) before sending it again; see docs/protocol.md, \"Reply subjects\"", err)}
	}
	if strings.Contains(err.Error(), `Publish to "$JS.`) || strings.Contains(err.Error(), `Publish to "$KV.`) {
		// The JetStream API (deadletters, forget, publish checking the
		// stream): memoryd's credential's, which the frontends' account
		// has none of; the advice below, an operator's credential in that
		// account, would be refused the same.
		return &refusal{err: fmt.Errorf("the NATS server refused it (%w): this NATS user may not use the JetStream API, which the admin commands (replay, forget, deadletters) and publish's check of the stream need: run them with memoryd's own credential, which is allowed it (docs/operations.md, \"Confining a frontend to its users\")", err)}
	}
	if strings.Contains(err.Error(), "Publish to") {
		// The request's own subject: no inbox prefix helps. memoryd's own
		// credential (the one on its host, in its environment file) is
		// refused every request, which the frontend advice alone hid.
		return &refusal{err: fmt.Errorf("the NATS server refused it (%w): this NATS user is not allowed that subject; a frontend's credential covers only its users' subjects (see docs/protocol.md, \"Reply subjects\"), and memoryd's own credential sends no requests: run client commands with an operator's credential in the frontends' account (docs/operations.md, \"Confining a frontend to its users\")", err)}
	}
	return &refusal{err: fmt.Errorf("the NATS server refused it (%w): this NATS user is not allowed that subject; a frontend's credential covers only its user's subjects and its own inbox prefix (--inbox-prefix): see docs/protocol.md, \"Reply subjects\"", err)}
}

// refusal is refusedByServer's error; sent says the request itself went
// out (only its reply's inbox was refused).
type refusal struct {
	sent bool
	err  error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// relabeled is err with another message.
type relabeled struct {
	msg string
	err error
}

func (e *relabeled) Error() string { return e.msg }
func (e *relabeled) Unwrap() error { return e.err }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runEnrich(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o                     clientOptions
		format, at, threshold string
		facts, collections    string
		maxResults, maxTokens int
	)
	defer func() { err = o.callError(err) }()
	f := newFlags("enrich", `Usage: memoryd enrich --user U [--json] [--format inline|system|markdown] [--facts relevant|all] [--max-results N] [--collections C1,C2] "message"

Asks the running memoryd for the memory relevant to the message and prints the
injection a frontend would add (nothing when no memory qualifies), or the whole
reply with --json. A degraded reply (memory, or part of it, unavailable) is reported on stderr with its reason.
Without --collections the user's default collections' documents are searched
(memoryd docs defaults); --collections "" searches none.`)
	o.register(f)
	f.ArgString(&format, "format", "inline", "injection format: inline, system or markdown")
	f.ArgString(&facts, "facts", events.FactsRelevant, "facts to inject: relevant (core facts and those the message is about) or all")
	f.ArgInt(&maxResults, "max-results", events.DefaultMaxResults, "most context items (1..50)")
	f.ArgInt(&maxTokens, "max-tokens", events.DefaultMaxTokens, "token budget of the injection (1..100000)")
	f.ArgString(&threshold, "threshold", "", "lowest score of a context item, 0..1 (default 0.3)")
	f.ArgString(&at, "at", "", "measure recency against this RFC 3339 time (default now)")
	f.ArgString(&collections, "collections", "", `comma-separated document collections to search ("scope/name" for a shared one; "" for none; absent: those set with memoryd docs defaults)`)
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return f.usageErr(`the message is missing: memoryd enrich --user U "message"`)
	}
	var names []string // nil: the defaults (the field is null)
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == "collections" {
			names = collectionList(collections) // given: these, or none
		}
	})
	if collections != "" && len(names) == 0 {
		// Only "" asks for none: " , " is a list of typos, which searched
		// none silently.
		return f.usageErr(`--collections %q names no collection (--collections "" searches none; leave it out for the user's defaults)`, collections)
	}
	req := events.EnrichRequest{
		UserID:      o.user,
		Message:     strings.Join(pos, " "),
		MaxResults:  &maxResults,
		MaxTokens:   &maxTokens,
		Format:      format,
		Facts:       facts,
		Collections: names,
	}
	if threshold != "" {
		v, err := strconv.ParseFloat(threshold, 64)
		if err != nil {
			return f.usageErr("--threshold %q is not a number", threshold)
		}
		req.Threshold = &v
	}
	if at != "" {
		if req.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return f.usageErr("--at %q is not RFC 3339", at)
		}
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	reply, err := c.Enrich(reqCtx, req)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(a.stdout, reply)
	}
	printEnrich(a.stdout, a.stderr, reply)
	return nil
}

// printEnrich prints an enrich reply for a person: the injection on stdout;
// on stderr why a degraded reply is, or that a whole one found no memory.
// A degraded reply says nothing of the memory: "no memory for this
// message" after it misled during an outage.
func printEnrich(stdout, stderr io.Writer, reply events.EnrichReply) {
	if reply.Degraded {
		fmt.Fprintf(stderr, "memoryd enrich: degraded reply: %s\n", reply.Reason)
	}
	if reply.Injection == "" {
		if !reply.Degraded {
			fmt.Fprintf(stderr, "memoryd enrich: no memory for this message (keywords: %s)\n", strings.Join(reply.Keywords, ", "))
		}
		return
	}
	fmt.Fprintln(stdout, reply.Injection)
}

func runFacts(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o    clientOptions
		hist historyOptions
	)
	defer func() { err = o.callError(err) }()
	f := newFlags("facts", `Usage: memoryd facts list --user U
       memoryd facts get --user U KEY
       memoryd facts set --user U KEY VALUE
       memoryd facts clear --user U KEY
       memoryd facts history --user U [--max-results N] [--before ID] KEY

Reads and writes a user's facts through the running memoryd. history shows
one fact's changes, newest first, each with the turn and conversation that
stated the value and when.`)
	o.register(f)
	o.perRequest = true // list pages
	hist.register(f)
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	action, pos := shift(pos)
	// Each action's arguments, as the usage names them.
	want := map[string][]string{"list": nil, "get": {"KEY"}, "set": {"KEY", "VALUE"}, "clear": {"KEY"}, "history": {"KEY"}}
	names, ok := want[action]
	if !ok {
		return f.usageErr("unknown action %q: use list, get, set, clear or history", action)
	}
	if len(pos) != len(names) {
		if len(names) == 0 {
			return f.usageErr("facts %s takes no argument, got %d", action, len(pos))
		}
		return f.usageErr("facts %s takes %s, got %d argument(s)", action, strings.Join(names, " "), len(pos))
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	switch action {
	case "list":
		facts, err := c.ListFacts(reqCtx, o.user)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, events.FactsReply{Facts: facts})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		for _, f := range facts {
			// The time shown is when the value was stated (source_at, the
			// order of the list), not when memoryd wrote it (updated_at,
			// which a replay or a late extraction moves).
			// A serve of an earlier release sends no source_at (a rolling
			// upgrade): its time is then the write's, and said so.
			when := "stated " + shownTime(f.SourceAt)
			if f.SourceAt.IsZero() {
				when = "written " + shownTime(f.UpdatedAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Key, f.Value, when)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "%d fact(s)\n", len(facts))
	case "get":
		fact, err := c.GetFact(reqCtx, o.user, pos[0])
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, fact)
		}
		fmt.Fprintln(a.stdout, fact.Value)
	case "set":
		o.changes = "memoryd facts get shows whether it was set; setting it again is safe"
		reply, err := c.SetFact(reqCtx, o.user, pos[0], pos[1])
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, reply)
		}
		if k := reply.Fact.Key; k != "" && k != pos[0] {
			// An alias is stored under its canonical key (protocol.md,
			// "Fact keys"): say which, or the key read back differs.
			fmt.Fprintf(a.stdout, "set %s (%s is an alias of it)\n", k, pos[0])
		} else {
			fmt.Fprintf(a.stdout, "set %s\n", pos[0])
		}
	case "clear":
		o.changes = "memoryd facts get shows whether it is still set; clearing it again is safe"
		n, err := c.ClearFact(reqCtx, o.user, pos[0])
		if err != nil {
			return err
		}
		return printDeleted(a, o.json, n)
	case "history":
		return hist.run(reqCtx, a, c, o, pos[0])
	}
	return nil
}

func runMemory(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o          clientOptions
		maxResults int
		id         int
		question   string
		all        bool
		scope      string
		since      string
		until      string
	)
	defer func() { err = o.callError(err) }()
	f := newFlags("memory", `Usage: memoryd memory search --user U [--max-results N] [--scope S] [--since T] [--until T] QUERY
       memoryd memory store --user U QUESTION ANSWER
       memoryd memory clear --user U (--id N | --question Q | --all)
       memoryd memory list --user U [--limit N] [--after CREATED_AT,ID | --all]
       memoryd memory get --user U --id N
       memoryd memory update --user U --id N [--question Q] [--answer A]
       memoryd memory delete --user U --id N

Searches, lists, stores, edits and forgets a user's remembered question/answer
pairs through the running memoryd.`)
	o.register(f)
	o.perRequest = true // list pages
	var items itemFlags
	items.register(f)
	f.ArgInt(&maxResults, "max-results", events.DefaultSearchResults, "most results of a search (1..50)")
	f.ArgInt(&id, "id", 0, "clear, get, update, delete: the context item id")
	f.ArgString(&question, "question", "", "clear: forget items with this question (case and spacing ignored); update: the new question")
	f.ArgBool(&all, "all", false, "clear: forget every context item of the user; list: every page")
	f.ArgString(&scope, "scope", "", "search: only items of this scope")
	f.ArgString(&since, "since", "", "search: only items created at or after this RFC 3339 time")
	f.ArgString(&until, "until", "", "search: only items created before this RFC 3339 time")
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	action, pos := shift(pos)
	var sinceT, untilT time.Time
	if action != "search" && (scope != "" || since != "" || until != "") {
		return f.usageErr("--scope, --since and --until are for memory search")
	}
	for _, t := range []struct {
		name, value string
		to          *time.Time
	}{{"since", since, &sinceT}, {"until", until, &untilT}} {
		if t.value == "" {
			continue
		}
		if *t.to, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return f.usageErr("--%s %q is not RFC 3339 (e.g. 2026-11-23T00:00:00Z)", t.name, t.value)
		}
	}
	switch {
	case isItemAction(action):
		if err := checkItemAction(f, action, pos, id); err != nil {
			return err
		}
	case action == "search" && len(pos) == 0:
		return f.usageErr("memory search needs a query")
	case action == "store" && len(pos) != 2:
		return f.usageErr("memory store takes QUESTION ANSWER (quote each)")
	case action == "clear" && len(pos) != 0:
		return f.usageErr("memory clear takes --id, --question or --all, not arguments")
	case action != "search" && action != "store" && action != "clear":
		return f.usageErr("unknown action %q: use search, store, clear, list, get, update or delete", action)
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	if isItemAction(action) {
		given := map[string]bool{}
		f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
		return runItemAction(reqCtx, a, c, &o, &items, action, int64(id), question, all, func(name string) bool { return given[name] })
	}
	switch action {
	case "search":
		req := events.SearchRequest{UserID: o.user, Query: strings.Join(pos, " "), MaxResults: &maxResults, Scope: scope, Since: sinceT, Until: untilT}
		reply, err := c.Search(reqCtx, req)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, reply)
		}
		for _, it := range reply.Results {
			fmt.Fprintf(a.stdout, "%.3f  id=%d  %s\n       Q: %s\n       A: %s\n", it.Score, it.ID, shownTime(it.CreatedAt), it.Question, it.Answer)
		}
		fmt.Fprintf(a.stderr, "%d result(s)\n", len(reply.Results))
	case "store":
		o.changes = "memoryd memory list shows whether it was stored; storing it again keeps one copy"
		reply, err := c.Store(reqCtx, events.StoreRequest{UserID: o.user, Question: pos[0], Answer: pos[1]})
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, reply)
		}
		if reply.Stored {
			fmt.Fprintf(a.stdout, "stored as id %d\n", reply.ID)
		} else {
			fmt.Fprintf(a.stdout, "already remembered as id %d\n", reply.ID)
		}
	case "clear":
		o.changes = "memoryd memory list shows what is left; clearing it again is safe"
		n, err := c.Clear(reqCtx, events.ClearRequest{UserID: o.user, ID: int64(id), Question: question, All: all})
		if err != nil {
			return err
		}
		return printDeleted(a, o.json, n)
	}
	return nil
}

func runStats(ctx context.Context, a *cli, args []string) (err error) {
	var o clientOptions
	defer func() { err = o.callError(err) }()
	f := newFlags("stats", "Usage: memoryd stats --user U\n\nShows a user's turns received, processed, failed and pending, their facts and context items (and, when the serve answering embeds, those without a vector, found by their words only), and the model tokens their turns spent today against the per-user daily cap, if any.")
	o.register(f)
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return f.usageErr("stats takes no arguments, got %q", pos)
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	s, err := c.Stats(reqCtx, o.user)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(a.stdout, s)
	}
	last := "never"
	if s.LastProcessedAt != nil {
		last = shownTime(*s.LastProcessedAt)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "turns received\t%d\nturns processed\t%d\nturns failed\t%d\nturns pending\t%d\nfacts\t%d\ncontext items\t%d\n",
		s.TurnsReceived, s.TurnsProcessed, s.TurnsFailed, s.TurnsPending, s.Facts, s.ContextItems)
	if e := s.Embeddings; e != nil {
		// Found by their words only: without it an operator saw them
		// nowhere.
		fmt.Fprintf(tw, "context items without a vector\t%d (model %s", e.ItemsWithoutVector, e.Model)
		if e.Refused > 0 {
			fmt.Fprintf(tw, "; %d refused by the embeddings server as input, not sent again: memoryd embed --backfill --retry-refused", e.Refused)
		}
		fmt.Fprintf(tw, ")\n")
	}
	fmt.Fprintf(tw, "last processed\t%s\n", last)
	// The day's spend against the cap, when there is either: over the cap
	// the user's turns are extracted offline (operations.md, "Daily spend
	// caps"), which the counts above do not show.
	switch {
	case s.LLMDailyTokenCap > 0 && s.LLMTokensToday >= s.LLMDailyTokenCap:
		fmt.Fprintf(tw, "model tokens today\t%d of the daily cap of %d: reached, turns are extracted offline until 00:00 UTC\n", s.LLMTokensToday, s.LLMDailyTokenCap)
	case s.LLMDailyTokenCap > 0:
		fmt.Fprintf(tw, "model tokens today\t%d of the daily cap of %d\n", s.LLMTokensToday, s.LLMDailyTokenCap)
	case s.LLMTokensToday > 0:
		// Per user: the reply carries no global cap (--llm-daily-tokens),
		// which sends every user's turns offline too once reached.
		fmt.Fprintf(tw, "model tokens today\t%d (no per-user daily cap)\n", s.LLMTokensToday)
	}
	return tw.Flush()
}

func printDeleted(a *cli, asJSON bool, n int64) error {
	if asJSON {
		return printJSON(a.stdout, events.DeletedReply{Deleted: n})
	}
	fmt.Fprintf(a.stdout, "deleted %d\n", n)
	return nil
}

func shift(args []string) (string, []string) {
	if len(args) == 0 {
		return "", nil
	}
	return args[0], args[1:]
}

// shownTime is how the commands print a time for people: in the local
// zone, to the second, and naming the zone, so that a reader on another
// machine (or a server kept in UTC) knows which clock it is.
func shownTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05 MST") }

// collectionList is a --collections value's names: comma-separated, each
// trimmed, empty ones dropped ("libs, notes," is libs and notes); never
// nil.
func collectionList(s string) []string {
	names := []string{}
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			names = append(names, c)
		}
	}
	return names
}
