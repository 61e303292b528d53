package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
)

// runDocs is `memoryd docs`: knowledge base documents through the running
// memoryd (put, list, delete, search), and the operator's read grants on
// shared scopes (grant, revoke), which go to the database.
func runDocs(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o                 clientOptions
		scope, collection string
		docID             string
		maxResults        int
		threshold         string
		chunkTokens       int
		overlapTokens     int
		collections       string
		revoke, clear     bool
	)
	defer func() { err = o.callError(err) }()
	f := newFlags("docs", `Usage: memoryd docs put --user U --collection C [--id ID] FILE...
       memoryd docs list --user U --collection C
       memoryd docs delete --user U --collection C ID
       memoryd docs search --user U [--collections C1,C2] QUERY
       memoryd docs defaults --user U [C...|--clear]
       memoryd docs grant --scope S --user U [--revoke]

Knowledge base documents (docs/protocol.md, Documents). put stores each FILE
(text or Markdown; source code and configuration by its extension or
name, .go, .py, .ts, .ini, .conf, Dockerfile.prod, ..., and #! scripts are
chunked as code) under its file name as the document id (--id for a single
file; files of one put with the same name are not put), printing one line
per file; it exits non-zero if any file failed.
With --scope S instead of --user, put, list, delete and search work on the
shared scope S's collections (its own subjects). search reads the user's
collections and the shared ones the user was granted ("scope/name").
defaults prints the user's default collections (what enrich searches when a
request names none), or with collections C... (or --clear) sets them.
grant lets --user read --scope's collections (--revoke takes it back): it
writes to the database (--database-url), never over NATS.`)
	o.register(f)
	o.perRequest = true // list pages; put bounds each file itself
	f.Lookup("database-url").Usage = "Postgres connection string (grant only: the other docs commands talk to memoryd over NATS)"
	f.ArgString(&scope, "scope", "", "a shared scope instead of --user (put, list, delete, search); the scope read (grant)")
	f.ArgString(&collection, "collection", "", "the collection (put, list, delete)")
	f.ArgString(&docID, "id", "", "document id (put of one file; default the file's name)")
	f.ArgString(&collections, "collections", "", "comma-separated collections to search (default: all readable)")
	f.ArgInt(&maxResults, "max-results", events.DefaultSearchResults, "most chunks (search)")
	f.ArgString(&threshold, "threshold", "", "least score of a chunk, 0..1 (search; default 0)")
	f.ArgInt(&chunkTokens, "chunk-tokens", 0, "chunk size in tokens when put creates the collection (0: 200; another than an existing collection's is refused)")
	f.ArgInt(&overlapTokens, "overlap-tokens", 0, "chunk overlap in tokens when put creates the collection (0: 30; another than an existing collection's is refused)")
	f.ArgBool(&revoke, "revoke", false, "take a grant back (grant)")
	f.ArgBool(&clear, "clear", false, "clear the user's collections searched by enrich when a request names none (defaults)")
	var pos []string
	for rest := args; ; {
		if err := f.Parse(rest); err != nil {
			return err
		}
		rest = f.Args()
		if len(rest) == 0 {
			break
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	action, pos := shift(pos)
	if action == "grant" {
		return docsGrant(ctx, a, f, &o, scope, revoke, pos)
	}
	owner, shared := o.user, false
	switch {
	case o.user != "" && scope != "":
		return f.usageErr("give --user or --scope, not both")
	case scope != "":
		owner, shared = scope, true
	case o.user == "":
		return f.usageErr("--user (or --scope) is required")
	}
	needCollection := func() error {
		if collection == "" {
			return f.usageErr("docs %s needs --collection", action)
		}
		return nil
	}
	switch action {
	case "put":
		if err := needCollection(); err != nil {
			return err
		}
		if len(pos) == 0 {
			return f.usageErr("docs put needs at least one FILE")
		}
		if docID != "" && len(pos) > 1 {
			return f.usageErr("--id names one document: give one FILE")
		}
	case "list":
		if err := needCollection(); err != nil {
			return err
		}
		if len(pos) != 0 {
			return f.usageErr("docs list takes no argument")
		}
	case "delete":
		if err := needCollection(); err != nil {
			return err
		}
		if len(pos) != 1 {
			return f.usageErr("docs delete takes one document ID")
		}
	case "search":
		if len(pos) == 0 {
			return f.usageErr("docs search needs a QUERY")
		}
		if collections != "" && len(collectionList(collections)) == 0 {
			// Sent as [], which docs.search reads as every collection.
			return f.usageErr("--collections %q names no collection (leave it out to search every one the user may read)", collections)
		}
	case "defaults":
		switch {
		case shared:
			return f.usageErr("docs defaults is a user's: give --user, not --scope")
		case clear && len(pos) > 0:
			return f.usageErr("give collections or --clear, not both")
		}
	default:
		return f.usageErr("unknown action %q: use put, list, delete, search, defaults or grant", action)
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	switch action {
	case "put":
		o.changes = "memoryd docs list shows whether it was stored; putting it again replaces it"
		return docsPut(reqCtx, a, c, &o, events.DocsPutRequest{UserID: owner, Shared: shared, Collection: collection, DocID: docID,
			ChunkTokens: chunkTokens, OverlapTokens: overlapTokens}, pos)
	case "list":
		return docsList(reqCtx, a, c, o.json, events.DocsListRequest{UserID: owner, Shared: shared, Collection: collection})
	case "delete":
		o.changes = "memoryd docs list shows whether it is gone; deleting it again is safe"
		r, err := c.DeleteDocument(reqCtx, events.DocsDeleteRequest{UserID: owner, Shared: shared, Collection: collection, DocID: pos[0]})
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, r)
		}
		if !r.Deleted {
			fmt.Fprintf(a.stdout, "no document %q in %s\n", pos[0], collection)
			return nil
		}
		fmt.Fprintf(a.stdout, "deleted %s\n", pos[0])
		return nil
	case "defaults":
		req := events.DocsDefaultsRequest{UserID: owner}
		if clear || len(pos) > 0 {
			req.Collections = append([]string{}, pos...) // not nil: a set
		}
		r, err := c.DocDefaults(reqCtx, req)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, r)
		}
		if len(r.Collections) == 0 {
			fmt.Fprintln(a.stdout, "(none)")
			return nil
		}
		fmt.Fprintln(a.stdout, strings.Join(r.Collections, " "))
		return nil
	default: // search
		req := events.DocsSearchRequest{UserID: owner, Shared: shared, Query: strings.Join(pos, " "), MaxResults: &maxResults}
		if threshold != "" {
			v, err := strconv.ParseFloat(threshold, 64)
			if err != nil {
				return f.usageErr("--threshold %q is not a number", threshold)
			}
			req.Threshold = &v
		}
		if collections != "" {
			req.Collections = collectionList(collections) // as enrich reads it
		}
		r, err := c.SearchDocuments(reqCtx, req)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, r)
		}
		for i, ch := range r.Chunks {
			where := ch.Source
			if len(ch.HeadingPath) > 0 {
				where += " > " + strings.Join(ch.HeadingPath, " > ")
			}
			fmt.Fprintf(a.stdout, "[%d] %.2f %s/%s#%d (%s)\n%s\n\n", i+1, ch.Score, ch.Collection, ch.DocID, ch.ChunkIndex, where, ch.Text)
		}
		fmt.Fprintf(a.stderr, "%d chunk(s)\n", len(r.Chunks))
		return nil
	}
}

// docsPutLine is what docs put --json prints for a file: its reply, or
// why it failed.
type docsPutLine struct {
	File  string               `json:"file"`
	Reply *events.DocsPutReply `json:"reply,omitempty"`
	Error string               `json:"error,omitempty"`
}

// docsPut puts each file, each request with its own --timeout, printing a
// line per file as it goes (the progress); any failure makes the command
// fail after the rest were tried.
func docsPut(ctx context.Context, a *cli, c *events.Client, o *clientOptions, base events.DocsPutRequest, files []string) error {
	failed, unchanged := 0, 0
	start := time.Now()
	clashes := idClashes(base.DocID, files)
	for i, file := range files {
		req := base
		data, err := os.ReadFile(file)
		if others := clashes[i]; err == nil && len(others) > 0 {
			none := "neither is put"
			if len(others) > 1 {
				none = "none of them is put"
			}
			err = fmt.Errorf("document id %q is also %s's (a file's id is its name), so %s: "+
				"give each its own id with --id (one file a put), or put them into separate collections", filepath.Base(file), strings.Join(others, "'s and "), none)
		}
		if err == nil && o.nc != nil && int64(len(data)) > o.nc.MaxPayload() {
			// Said before encoding megabytes into a request NATS refuses.
			err = tooLarge(o, file, len(data))
		}
		if err == nil {
			req.Content, req.Source = string(data), filepath.Base(file)
			if req.DocID == "" {
				req.DocID = req.Source
			}
			reqCtx, cancel := context.WithTimeout(ctx, o.timeout)
			var r events.DocsPutReply
			r, err = c.PutDocument(reqCtx, req)
			cancel()
			if errors.Is(err, nats.ErrMaxPayload) {
				err = tooLarge(o, file, len(data))
			}
			if err == nil && r.Unchanged {
				unchanged++
			}
			if err == nil && o.json {
				// One line a file (JSON Lines), as the files are put.
				if err := json.NewEncoder(a.stdout).Encode(docsPutLine{File: file, Reply: &r}); err != nil {
					return err
				}
				continue
			}
			if err == nil {
				state := fmt.Sprintf("%d chunk(s)", r.Chunks)
				switch {
				case r.Unchanged:
					state = "unchanged"
				case !r.Searchable:
					state = fmt.Sprintf("pending (job %d)", r.JobID)
				}
				if r.LargestChunkTokens > events.DefaultMaxTokens {
					// Never injected at enrich's default budget: said here,
					// where the chunk size was chosen.
					state += fmt.Sprintf("; warning: its largest chunk is %d tokens, over enrich's default max_tokens of %d: enrich injects no chunk larger than a request's max_tokens "+
						"(send a larger max_tokens, or put the documents into a collection of a smaller --chunk-tokens; docs search finds them whatever their size)",
						r.LargestChunkTokens, events.DefaultMaxTokens)
				}
				fmt.Fprintf(a.stdout, "[%d/%d] %s: %s\n", i+1, len(files), file, state)
				continue
			}
		}
		failed++
		if o.json {
			if err := json.NewEncoder(a.stdout).Encode(docsPutLine{File: file, Error: o.callError(err).Error()}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(a.stdout, "[%d/%d] %s: failed: %v\n", i+1, len(files), file, o.callError(err))
	}
	// Files of the content already stored are counted apart: "2 file(s)
	// put" of a put that wrote nothing misled.
	summary := fmt.Sprintf("%d file(s) put, ", len(files)-failed-unchanged)
	if unchanged > 0 {
		summary += fmt.Sprintf("%d unchanged, ", unchanged)
	}
	fmt.Fprintf(a.stderr, "%s%d failed, in %s\n", summary, failed, time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		return fmt.Errorf("%d of %d file(s) failed", failed, len(files))
	}
	return nil
}

// tooLarge is the error of a file whose put is larger than the NATS
// server's max_payload: the file, its size, the limit and what to do.
func tooLarge(o *clientOptions, file string, size int) error {
	limit := "its max_payload"
	if o.nc != nil {
		limit = fmt.Sprintf("its max_payload of %d bytes", o.nc.MaxPayload())
	}
	return fmt.Errorf("%s is %d bytes, larger than the NATS server takes (%s, for the request with the content JSON-escaped); memoryd takes documents up to serve's --max-document-bytes (8 MiB by default): "+
		"split the file into smaller documents, or raise max_payload in the NATS server's configuration", filepath.Base(file), size, limit)
}

// idClashes maps the index of each file that would get the same document
// id (its file name, with no --id) as another file of the put to those
// other files: a put of both would report each put and keep the last one
// only (the READMEs of several modules), so none of them is put. Only
// files that can be put clash: one missing or a directory fails on its own
// and leaves the other put. The same file under two names (./notes.md, a
// symbolic link to it) is no clash: its second put is unchanged.
func idClashes(id string, files []string) map[int][]string {
	if id != "" {
		return nil
	}
	type named struct {
		i    int
		info os.FileInfo
	}
	byName := map[string][]named{}
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil || info.IsDir() {
			continue // its read fails, with its own error
		}
		byName[filepath.Base(f)] = append(byName[filepath.Base(f)], named{i, info})
	}
	out := map[int][]string{}
	for _, same := range byName {
		for _, f := range same {
			var others []string
			for _, g := range same {
				if !os.SameFile(f.info, g.info) && !slices.Contains(others, files[g.i]) {
					others = append(others, files[g.i])
				}
			}
			if len(others) > 0 {
				out[f.i] = others
			}
		}
	}
	return out
}

func docsList(ctx context.Context, a *cli, c *events.Client, asJSON bool, req events.DocsListRequest) error {
	var all []events.DocumentInfo
	for {
		r, err := c.ListDocuments(ctx, req)
		if err != nil {
			return err
		}
		all = append(all, r.Documents...)
		if r.Next == "" {
			break
		}
		req.After = r.Next
	}
	if asJSON {
		return printJSON(a.stdout, events.DocsListReply{Documents: all})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	for _, d := range all {
		fmt.Fprintf(tw, "%s\t%s\t%d bytes\t%d chunk(s)\t%s\n", d.DocID, d.Status, d.Size, d.Chunks, shownTime(d.UpdatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "%d document(s)\n", len(all))
	return nil
}

// docsGrant is `memoryd docs grant`: on the database, as an operator.
func docsGrant(ctx context.Context, a *cli, f *flags, o *clientOptions, scope string, revoke bool, pos []string) error {
	if scope == "" || o.user == "" {
		return f.usageErr("docs grant needs --scope and --user")
	}
	if len(pos) != 0 {
		return f.usageErr("docs grant takes no argument")
	}
	svc, err := o.conn.newApp(a, "memoryd-docs-grant")
	if err != nil {
		return err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	changed, err := svc.GrantReader(ctx, scope, o.user, revoke)
	if err != nil {
		// Run again, it says whether this one was done: "already
		// granted", "was not granted".
		hint := "the grant's database commit was not confirmed: it may be granted already; granting it again is safe, and says \"already granted\" if so"
		if revoke {
			hint = "the revoke's database commit was not confirmed: it may be revoked already; revoking it again is safe, and says \"was not granted\" if so"
		}
		return ifUnconfirmed(err, hint)
	}
	verb := map[bool]string{false: "granted", true: "revoked"}[revoke]
	if !changed {
		verb = map[bool]string{false: "already granted", true: "was not granted"}[revoke]
	}
	fmt.Fprintf(a.stdout, "%s: %s reads %s's collections\n", verb, o.user, scope)
	return nil
}
