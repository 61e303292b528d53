package agenttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/factkey"
)

// FactsURI is the resource holding the user's facts as JSON.
const FactsURI = "memoryd://facts"

// identity returns the user a request acts for.
type identity func(*mcp.RequestExtra) (string, error)

// Tool arguments and results. The json names are what a model sees; the
// jsonschema tags are the descriptions in each tool's schema. No argument
// names a user: the session decides who that is.

type searchIn struct {
	Query string `json:"query" jsonschema:"what to look for, in the user's words or yours (keywords or a question)"`
	Limit int    `json:"limit,omitempty" jsonschema:"most memories to return, 1 to 50 (default 5)"`
	Scope string `json:"scope,omitempty" jsonschema:"only memories of this scope (e.g. a project name the frontend tags turns with); omit to search all"`
	Since string `json:"since,omitempty" jsonschema:"only memories created at or after this time (RFC 3339, e.g. 2026-11-01T00:00:00Z, or a date, 2026-11-01, from its start in UTC); for questions about a time such as last week"`
	Until string `json:"until,omitempty" jsonschema:"only memories created before this time (RFC 3339, or a date, 2026-11-30, through its end in UTC)"`
}

type memory struct {
	ID        int64   `json:"id" jsonschema:"the memory's id (for delete_memory)"`
	Question  string  `json:"question" jsonschema:"the question, topic or note remembered"`
	Answer    string  `json:"answer,omitempty" jsonschema:"the answer remembered (empty for a note)"`
	Score     float64 `json:"score,omitempty" jsonschema:"search only: relevance times recency, 0 to 1"`
	CreatedAt string  `json:"created_at" jsonschema:"when it was said or stored (RFC 3339)"`
}

type searchOut struct {
	Results   []memory `json:"results" jsonschema:"the matching memories, best first (empty when none matches)"`
	Truncated bool     `json:"truncated,omitempty" jsonschema:"true when lower-ranked matches were left out to keep the result within its size limit: ask again with a narrower query or a lower limit for fewer, or delete what is no longer needed"`
}

type storeIn struct {
	Question string `json:"question,omitempty" jsonschema:"the question or topic, when storing a question/answer pair"`
	Answer   string `json:"answer,omitempty" jsonschema:"the answer to question"`
	Note     string `json:"note,omitempty" jsonschema:"a free-form note to remember instead of a question/answer pair"`
}

type storeOut struct {
	ID     int64 `json:"id" jsonschema:"the memory's id"`
	Stored bool  `json:"stored" jsonschema:"false when the user already had this exact memory (id is then the existing one)"`
}

type factKeyIn struct {
	Key string `json:"key" jsonschema:"the fact's key, e.g. name, location, occupation (another spelling of a known key, such as city or job, names it)"`
}

type setFactIn struct {
	Key   string    `json:"key" jsonschema:"the fact's key in snake_case: one of the known keys where it fits (see the tool's description); other spellings of a known key (city, job) are stored under it, and any key is put in lower case with underscores"`
	Value factValue `json:"value" jsonschema:"the fact's value, e.g. Lisbon; for a list key, its items separated by commas or as an array of strings"`
}

// factValue is set_fact's value: a string, or an array of strings, the
// items of a list key, which is what a model sends when told a list may be
// "a JSON array of strings" (the schema said string, and refused it). An
// array is kept as its JSON text, which the service reads as the list's
// items (events.ListArray).
type factValue struct {
	text  string
	array bool
	items string // an array's items, joined by commas
}

func (v *factValue) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &v.text); err == nil {
		return nil
	}
	// A number or a boolean is its text as written: models send
	// {"key": "age", "value": 34} (an MCP walk: refused as not a string).
	var scalar any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&scalar) == nil {
		switch scalar.(type) {
		case json.Number, bool:
			v.text = string(bytes.TrimSpace(b))
			return nil
		}
	}
	var items []string
	if err := json.Unmarshal(b, &items); err != nil {
		return errors.New("value: a string (a number or a boolean is taken as written), or an array of strings for a list key")
	}
	enc, err := json.Marshal(items)
	if err != nil {
		return err
	}
	v.text, v.array, v.items = string(enc), true, strings.Join(items, ",")
	return nil
}

// typeSchemas are the schemas of argument types whose JSON is not their Go
// shape's.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	// anyOf of two single types, not "type": ["string", "array"]: Gemini's
	// function declarations take one type a schema, and clients passing
	// them on (LangChain, n8n) had the whole tool list refused ("Proto
	// field is not repeating").
	reflect.TypeFor[factValue](): {AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "number"}, {Type: "boolean"},
		{Type: "array", Items: &jsonschema.Schema{Type: "string"}}}},
}

type fact struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	UpdatedAt string `json:"updated_at" jsonschema:"when memoryd wrote the value (RFC 3339)"`
}

type factsOut struct {
	Facts []fact `json:"facts" jsonschema:"the user's facts, most recently set first"`
}

type clearFactOut struct {
	Deleted bool `json:"deleted" jsonschema:"false when the user had no fact with that key"`
}

type listIn struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"most memories on this page, 1 to 200 (default 50)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page; omit for the newest memories"`
	Scope  string `json:"scope,omitempty" jsonschema:"only memories of this scope; omit to list all"`
}

type listOut struct {
	Memories   []memory `json:"memories" jsonschema:"one page of memories, newest first"`
	NextCursor string   `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last page (a page may hold fewer than limit memories when they are long)"`
}

type deleteIn struct {
	ID int64 `json:"id" jsonschema:"the id of the memory to delete, from search_memory or list_memories"`
}

type deleteOut struct {
	Deleted bool `json:"deleted" jsonschema:"true: the memory is gone"`
}

// readOnly annotates a tool that only reads the user's memory, so that a
// client need not ask the user before each call (a tool without annotations
// is taken to be destructive). Every tool works on memoryd's memory alone:
// no open world.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
}

// newMCPServer returns an MCP server whose tools act for the user who
// returns, and whose requests' contexts end when cut does.
func (s *Server) newMCPServer(who identity, cut context.Context) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "memoryd", Version: s.cfg.Version}, &mcp.ServerOptions{
		Logger: slog.New(warnings{s.cfg.Logger.Handler()}),
		Instructions: "Long-term memory about the user you are talking with. Call search_memory before answering " +
			"anything that may depend on what the user told you before; call set_fact for a durable fact about the " +
			"user (name, location, preferences) and store_memory for anything else worth recalling later.",
	})
	types := argTypes{}
	srv.AddReceivingMiddleware(nullIsAbsent, types.middleware, endWith(cut))
	c := s.cfg.Client
	t := tools{s: s, who: who, cut: cut}

	addTool(srv, types, &mcp.Tool{Name: "search_memory", Title: "Search memory",
		Description: "Search the user's long-term memory (question/answer pairs and notes remembered from earlier " +
			"conversations) for what is relevant to a query. Use it before answering a question that may depend on " +
			"something the user said before. Returns the best matches first, each with its id, question, answer, " +
			"score and date; facts (key/value) are not searched here: use list_facts or get_fact.",
		Annotations: readOnly()},
		bounds{"limit": {1, events.MaxMaxResults}},
		wrap(t, func(ctx context.Context, user string, in searchIn) (searchOut, error) {
			req := events.SearchRequest{UserID: user, Query: in.Query, Scope: in.Scope}
			if in.Limit != 0 {
				req.MaxResults = &in.Limit
			}
			var err error
			if req.Since, err = parseTime("since", in.Since); err != nil {
				return searchOut{}, err
			}
			if req.Until, err = parseTime("until", in.Until); err != nil {
				return searchOut{}, err
			}
			if !req.Since.IsZero() && !req.Until.IsZero() && !req.Since.Before(req.Until) {
				// Named as the model wrote them: the service's refusal
				// named the instants, an until date as the next day's
				// start (until "2026-11-01" read as 2026-11-02T00:00:00Z).
				return searchOut{}, fmt.Errorf("since %q is not before until %q: no memory is created in between", in.Since, in.Until)
			}
			reply, err := c.Search(ctx, req)
			kept := withinBytes(reply.Results, s.cfg.MaxResultBytes)
			return searchOut{Results: memories(kept), Truncated: reply.Truncated || len(kept) < len(reply.Results)}, err
		}))

	addTool(srv, types, &mcp.Tool{Name: "store_memory", Title: "Store a memory",
		Description: "Remember something for later conversations with this user: either a question/answer pair " +
			"(question and answer) or a free-form note (note). Use it for things worth recalling that are not a " +
			"single key/value fact (use set_fact for those). Storing the same pair twice keeps one copy. Returns " +
			"the memory's id.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)}},
		nil,
		wrap(t.writes("search_memory or list_memories shows whether it was stored; storing it again keeps one copy"), func(ctx context.Context, user string, in storeIn) (storeOut, error) {
			req := events.StoreRequest{UserID: user, Question: in.Question, Answer: in.Answer}
			// The errors name the tool's fields, not the service's (a note is
			// stored as a question without an answer).
			switch {
			case in.Note != "" && (in.Question != "" || in.Answer != ""):
				return storeOut{}, errors.New("give either note, or question (with an answer or not), not both")
			case in.Note != "" && strings.TrimSpace(in.Note) == "":
				return storeOut{}, errors.New("note is blank")
			case len(in.Note) > events.MaxQuestionBytes:
				return storeOut{}, fmt.Errorf("note is %d bytes, over the %d a memory may hold", len(in.Note), events.MaxQuestionBytes)
			case strings.ContainsRune(in.Note, 0):
				// The service would name the question it is sent as.
				return storeOut{}, errors.New("note contains a NUL character")
			case in.Note != "":
				req.Question = in.Note
			case strings.TrimSpace(in.Question) == "":
				return storeOut{}, errors.New("give question (with an answer or not), or note")
			}
			reply, err := c.Store(ctx, req)
			return storeOut(reply), err
		}))

	addTool(srv, types, &mcp.Tool{Name: "get_fact", Title: "Get a fact",
		Description: "Get one fact about the user by its key (e.g. name, location). Returns the key, value and when " +
			"it was set; an error says when the user has no such fact (list_facts shows the keys there are).",
		Annotations: readOnly()},
		nil,
		wrap(t, func(ctx context.Context, user string, in factKeyIn) (fact, error) {
			key, _, err := factKey(in.Key)
			if err != nil {
				return fact{}, err
			}
			f, err := c.GetFact(ctx, user, key)
			for _, earlier := range earlierKeys(in.Key, key) {
				var svc *events.ServiceError
				if !errors.Is(err, events.ErrFactNotSet) && !(errors.As(err, &svc) && svc.Code == 404) {
					break
				}
				// A fact set as an earlier memoryd wrote its key.
				if g, gerr := c.GetFact(ctx, user, earlier); gerr == nil {
					f, err = g, nil
				}
			}
			return wireFact(f), err
		}))

	addTool(srv, types, &mcp.Tool{Name: "set_fact", Title: "Set a fact",
		Description: "Remember a durable fact about the user as a key/value pair (their name, where they live, a " +
			"preference), replacing the key's previous value. Use it when the user states or corrects such a " +
			"fact. Returns the fact as now stored. Known keys, which memoryd also extracts from conversations " +
			"(use them, so that a later statement replaces the value): " + knownKeys + ". List keys hold " +
			"several items separated by commas (or given as a JSON array of strings), and the value given replaces the whole list.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}},
		nil,
		wrap(t.writes("get_fact shows whether it was set; setting it again is safe"), func(ctx context.Context, user string, in setFactIn) (fact, error) {
			if strings.TrimSpace(in.Value.text) == "" {
				// Not the service's "use facts.clear": the tool is clear_fact.
				return fact{}, errors.New("value is required (use clear_fact to delete a fact)")
			}
			key, listOf, err := factKey(in.Key)
			if err != nil {
				return fact{}, err
			}
			if _, list := events.CanonicalFactKey(key); in.Value.array && !list {
				return fact{}, fmt.Errorf("value: an array is for a list key (%s); %q holds one value, a string", listKeys, key)
			}
			if listOf != "" {
				return fact{}, fmt.Errorf("%q names the list %s, which set_fact replaces whole: set_fact %s with every item, separated by commas (list_facts shows the items there are)", in.Key, listOf, listOf)
			}
			items := in.Value.text
			if in.Value.array {
				items = in.Value.items
			}
			if _, list := events.CanonicalFactKey(key); list && strings.TrimSpace(strings.NewReplacer(",", "", ";", "").Replace(items)) == "" {
				// A list key's value of separators alone, or an array of
				// no item (the service's "value holds no item (use
				// facts.clear ...)").
				return fact{}, errors.New("value holds no item (use clear_fact to delete a fact)")
			}
			reply, err := c.SetFact(ctx, user, key, in.Value.text)
			return wireFact(reply.Fact), err
		}))

	addTool(srv, types, &mcp.Tool{Name: "list_facts", Title: "List facts",
		Description: "List every fact known about the user (key/value pairs such as name and location), most " +
			"recently set first. Use it to get an overview of who the user is.",
		Annotations: readOnly()},
		nil,
		wrap(t, func(ctx context.Context, user string, _ struct{}) (factsOut, error) {
			facts, err := c.ListFacts(ctx, user)
			out := factsOut{Facts: []fact{}}
			for _, f := range facts {
				out.Facts = append(out.Facts, wireFact(f))
			}
			return out, err
		}))

	addTool(srv, types, &mcp.Tool{Name: "clear_fact", Title: "Delete a fact",
		Description: "Delete one fact about the user by its key, e.g. when the user asks you to forget it or it is " +
			"no longer true. Returns whether a fact was deleted.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}},
		nil,
		wrap(t.writes("get_fact shows whether it is still set; clearing it again is safe"), func(ctx context.Context, user string, in factKeyIn) (clearFactOut, error) {
			key, listOf, err := factKey(in.Key)
			if err != nil {
				return clearFactOut{}, err
			}
			if listOf != "" {
				return clearFactOut{}, fmt.Errorf("%q names the list %s, which clear_fact deletes whole: to remove one item, set_fact %s with the items to keep; clear_fact %s deletes them all", in.Key, listOf, listOf, listOf)
			}
			n, err := c.ClearFact(ctx, user, key)
			for _, earlier := range earlierKeys(in.Key, key) {
				if err != nil || n > 0 {
					break
				}
				if n, err = c.ClearFact(ctx, user, earlier); err != nil { // set as an earlier memoryd wrote its key
					err = afterAChange{err} // the first clear was recorded (review9)
				}
			}
			return clearFactOut{Deleted: n > 0}, err
		}))

	addTool(srv, types, &mcp.Tool{Name: "list_memories", Title: "List memories",
		Description: "List the user's remembered question/answer pairs and notes, newest first, one page at a " +
			"time; pass the returned next_cursor as cursor for the next page. Use it to review or clean up what " +
			"is remembered (search_memory finds what is relevant to a query).",
		Annotations: readOnly()},
		bounds{"limit": {1, events.MaxContextPage}},
		wrap(t, func(ctx context.Context, user string, in listIn) (listOut, error) {
			req := events.ContextListRequest{UserID: user, Scope: in.Scope}
			if in.Limit != 0 {
				req.Limit = &in.Limit
			}
			if in.Cursor != "" {
				cur, err := parseCursor(in.Cursor)
				if err != nil {
					return listOut{}, err
				}
				req.After = &cur
			}
			reply, err := c.ListContext(ctx, req)
			kept := withinBytes(reply.Items, s.cfg.MaxResultBytes)
			out := listOut{Memories: memories(kept)}
			switch {
			case len(kept) < len(reply.Items):
				last := kept[len(kept)-1] // withinBytes keeps one at least
				out.NextCursor = formatCursor(events.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID})
			case reply.Next != nil:
				out.NextCursor = formatCursor(*reply.Next)
			}
			return out, err
		}))

	addTool(srv, types, &mcp.Tool{Name: "delete_memory", Title: "Delete a memory",
		Description: "Delete one remembered question/answer pair or note by its id (from search_memory or " +
			"list_memories), e.g. when the user asks you to forget it or it is wrong. An error says when there " +
			"is no memory with that id.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}},
		// An id is one search_memory or list_memories gave: bounded in
		// the schema, so that 0 or 1e20 is refused in the tool's own
		// words (before: the service's, or a Go decoding error). The
		// bound is the largest float64 under 2^63: float64(MaxInt64) is
		// 2^63, which passed the schema and failed decoding into int64.
		bounds{"id": {1, maxID}},
		wrap(t.writes("list_memories shows whether it is gone; deleting it again is safe (not found if it was deleted)"), func(ctx context.Context, user string, in deleteIn) (deleteOut, error) {
			err := c.DeleteContext(ctx, user, in.ID)
			if svc := (*events.ServiceError)(nil); errors.As(err, &svc) && svc.Code == 404 {
				// The service's "no context item N" named what the tools
				// call a memory.
				return deleteOut{}, fmt.Errorf("not found: no memory with id %d (search_memory and list_memories give the ids there are)", in.ID)
			}
			return deleteOut{Deleted: err == nil}, err
		}))

	srv.AddResource(&mcp.Resource{URI: FactsURI, Name: "facts", Title: "The user's facts", MIMEType: "application/json",
		Description: "Every fact known about the user (key, value, updated_at), most recently set first, as JSON."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			user, err := who(req.Extra)
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			defer cancel()
			release, err := s.enter(ctx, cut, user)
			if err != nil {
				if cut := s.stopping(ctx, err, FactsURI, user, false); cut != nil {
					err = cut
				}
				return nil, resourceError(err)
			}
			defer release()
			facts, err := retryOverloaded(ctx, func() ([]events.Fact, error) { return c.ListFacts(ctx, user) })
			if err != nil {
				if cut := s.stopping(ctx, err, FactsURI, user, true); cut != nil {
					err = cut
				}
				return nil, resourceError(err)
			}
			out := factsOut{Facts: []fact{}}
			for _, f := range facts {
				out.Facts = append(out.Facts, wireFact(f))
			}
			data, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			// One user's facts: cacheable by that user's client alone, never
			// by an intermediary (the SDK's default scope is "public").
			return &mcp.ReadResourceResult{Cacheable: mcp.Cacheable{CacheScope: "private"},
				Contents: []*mcp.ResourceContents{{URI: FactsURI, MIMEType: "application/json", Text: string(data)}}}, nil
		})
	return srv
}

// tools holds what every tool handler needs.
type tools struct {
	s   *Server
	who identity
	cut context.Context // ends when the server stops (newMCPServer)
	// readBack is set for a tool that changes memory: how the model
	// tells whether a call that timed out was done after all.
	readBack string
}

// writes is t for a tool that changes memory, readBack saying how to
// check whether a call of it that got no reply was done.
func (t tools) writes(readBack string) tools {
	t.readBack = readBack
	return t
}

// wrap makes a typed SDK handler of fn: it resolves the session's user,
// bounds the call to memoryd by Config.Timeout and turns memoryd's errors
// into sentences a model can act on. The SDK reports a returned error as a
// tool error (isError), not a protocol error.
func wrap[In, Out any](t tools, fn func(ctx context.Context, user string, in In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		user, err := t.who(req.Extra)
		if err != nil {
			return nil, zero, err
		}
		ctx, cancel := context.WithTimeout(ctx, t.s.cfg.Timeout)
		defer cancel()
		start := time.Now()
		release, err := t.s.enter(ctx, t.cut, user)
		if err != nil {
			if cut := t.s.stopping(ctx, err, req.Params.Name, user, false); cut != nil {
				return nil, zero, cut
			}
			return nil, zero, explain(err)
		}
		defer release()
		out, err := retryOverloaded(ctx, func() (Out, error) { return fn(ctx, user, in) })
		if err != nil {
			if cut := t.s.stopping(ctx, err, req.Params.Name, user, true); cut != nil {
				return nil, zero, cut
			}
			t.s.cfg.Logger.Debug("mcp tool failed", "tool", req.Params.Name, "user_token", events.UserToken(user), "error", err)
			if timedOut(err) && !t.s.cfg.Client.Connected() {
				// Not memoryd's silence: the request never left (nats.go
				// holds it while it reconnects), or left before the
				// connection was lost.
				if t.readBack != "" {
					return nil, zero, fmt.Errorf("memory is unavailable: the connection to NATS is lost (reconnecting); "+
						"the change may have been made if the request left before it was lost: %s", t.readBack)
				}
				return nil, zero, errors.New("memory is unavailable: the connection to NATS is lost (reconnecting); try again shortly")
			}
			if timedOut(err) && t.readBack != "" {
				// memoryd goes on with a request whose requester stopped
				// waiting: a write timed out here may commit after.
				return nil, zero, fmt.Errorf("memory is unavailable: memoryd did not reply in time; the change may have been made (or may still be made): %s", t.readBack)
			}
			return nil, zero, explain(err)
		}
		t.s.cfg.Logger.Debug("mcp tool", "tool", req.Params.Name, "user_token", events.UserToken(user), "duration", time.Since(start))
		return nil, out, nil
	}
}

// explain rewrites an error of the memoryd client as one sentence for the
// model: what memoryd answered, or that memoryd is not reachable.
func explain(err error) error {
	var svc *events.ServiceError
	switch {
	case errors.As(err, &svc) && svc.Code == 404:
		return fmt.Errorf("not found: %s", svc.Description)
	case errors.As(err, &svc) && svc.Code == 400:
		return fmt.Errorf("invalid arguments: %s", svc.Description)
	case errors.As(err, &svc):
		return fmt.Errorf("memoryd failed (%d): %s", svc.Code, svc.Description)
	case errors.Is(err, events.ErrFactNotSet):
		return fmt.Errorf("not set: %w", err)
	case errors.Is(err, nats.ErrMaxPayload):
		// Refused by the NATS client before memoryd could name the field
		// over its limit.
		return fmt.Errorf("invalid arguments: too large to send to memoryd (over the NATS server's max payload); "+
			"a query, question or note may hold %d KiB, an answer %d KiB, a fact value %d KiB",
			events.MaxMessageBytes>>10, events.MaxAnswerBytes>>10, events.MaxFactValueBytes>>10)
	case errors.Is(err, nats.ErrNoResponders):
		return errors.New("memory is unavailable: no memoryd service is running")
	case timedOut(err):
		return errors.New("memory is unavailable: memoryd did not reply in time")
	}
	return err
}

func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// resourceError is err for a resource read, which has no tool result to
// carry it: a JSON-RPC internal error (-32603) with explain's message.
// Returned plain, the SDK sent it with code 0, which clients take for no
// code at all.
func resourceError(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: explain(err).Error()}
}

// bounds are the inclusive [min, max] of integer arguments.
type bounds map[string][2]float64

// addTool adds a typed tool whose input schema is inferred from In, with
// the integer bounds b written into it (the SDK validates arguments
// against the schema before the handler runs), and records its arguments'
// types in types (argTypes.middleware names a wrong one).
func addTool[In, Out any](srv *mcp.Server, types argTypes, tool *mcp.Tool, b bounds, h mcp.ToolHandlerFor[In, Out]) {
	schema, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		panic(fmt.Sprintf("agenttools: schema of %s: %v", tool.Name, err))
	}
	for name, r := range b {
		p := schema.Properties[name]
		p.Minimum, p.Maximum = ptr(r[0]), ptr(r[1])
	}
	if schema.Properties == nil {
		// A tool without arguments (list_facts): OpenAI refuses a function
		// whose object schema has no properties ("object schema missing
		// properties"), and so did every client passing the tool list on.
		schema.Properties = map[string]*jsonschema.Schema{}
	}
	tool.InputSchema = schema
	types.add(tool.Name, schema)
	mcp.AddTool(srv, tool, h)
}

// maxID is the largest float64 under 2^63, the bound of an id argument.
var maxID = math.Nextafter(math.MaxInt64, 0)

// nullIsAbsent is a receiving middleware that drops the top-level
// arguments of a tools/call that are null: the way a model omits an
// optional argument when its client made every argument required and
// nullable (OpenAI's strict function calling), and what models send
// unasked ("scope": null). The schemas take no null, so such a call was
// refused as a whole ("has type \"null\", want \"string\""); a required
// argument sent as null is now refused as missing, naming it.
func nullIsAbsent(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && len(r.Params.Arguments) > 0 {
			var args map[string]json.RawMessage
			if json.Unmarshal(r.Params.Arguments, &args) == nil {
				n := len(args)
				maps.DeleteFunc(args, func(_ string, v json.RawMessage) bool { return string(v) == "null" })
				if len(args) < n {
					if b, err := json.Marshal(args); err == nil {
						r.Params.Arguments = b
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// endWith is a receiving middleware that ends each request's context when
// cut ends, with cut's cause: the SDK's contexts end only with the
// client's cancellation (or its connection's end), and a closing session
// waits for its calls.
func endWith(cut context.Context) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			defer context.AfterFunc(cut, func() { cancel(context.Cause(cut)) })()
			return next(ctx, method, req)
		}
	}
}

// enter waits for one of user's slots (userGate.enter) within ctx, and
// refuses with cut's cause a call that got one once cut had ended: the
// stop ends each call's context from a goroutine of its own
// (context.AfterFunc in endWith), so a waiting call could take the slot a
// cut call had just freed before its own context ended, and be sent.
func (s *Server) enter(ctx, cut context.Context, user string) (release func(), err error) {
	release, err = s.gate.enter(ctx, user)
	if err == nil && cut.Err() != nil {
		release()
		return nil, context.Cause(cut)
	}
	return release, err
}

// stopping returns the error of a call cut because the server is stopping
// (its context's cause, or err, is errStopping), logged, and nil for any
// other call; sent says whether the call had gone to memoryd (it may have
// changed memory) or was cut while it waited its turn (nothing was asked).
// A call whose last reply was memoryd's overloaded refusal is told that
// nothing was done, unless an earlier call of it changed memory
// (afterAChange).
func (s *Server) stopping(ctx context.Context, err error, what, user string, sent bool) error {
	if !errors.Is(context.Cause(ctx), errStopping) && !errors.Is(err, errStopping) {
		return nil
	}
	refused := false
	if svc := (*events.ServiceError)(nil); errors.As(err, &svc) && svc.Overloaded() && !errors.As(err, new(afterAChange)) {
		// memoryd refused the last try without doing anything, and the
		// stop cut retryOverloaded's pause before the next (review8).
		refused = true
	}
	s.cfg.Logger.Warn("mcp tool call cut by the stop", "tool", what, "user_token", events.UserToken(user), "sent", sent && !refused)
	if refused {
		return errors.New("memory is unavailable: the MCP server is stopping and cut this call while memoryd was refusing it as overloaded " +
			"(nothing was done); try again once it is back")
	}
	if !sent {
		return errors.New("memory is unavailable: the MCP server is stopping and cut this call before sending it to memoryd " +
			"(nothing was asked of memoryd); try again once it is back")
	}
	return errors.New("memory is unavailable: the MCP server is stopping and cut this call before memoryd replied " +
		"(a change it asked for may or may not have been made); try again once it is back")
}

// afterAChange is the error of a tool's later call to memoryd, one made
// after an earlier call of the same tool changed memory (clear_fact's
// clear of an earlier spelling of the key, after the key's own clear was
// recorded): stopping does not tell its overloaded refusal "nothing was
// done".
type afterAChange struct{ error }

func (e afterAChange) Unwrap() error { return e.error }

func ptr[T any](v T) *T { return &v }

// factKey is the key a fact tool's key names: an ASCII key put in
// snake_case as the extractors put a model's keys (events.SnakeKey:
// "Favorite Color", "favoriteColor" and "favorite.color" are
// favorite_color), another trimmed, in lower case, runs of spaces and
// hyphens an underscore; and an alias of the vocabulary its canonical key
// (city is location), so that an agent's spelling and the key extraction
// keeps current are one fact. listOf is the list key an alias names
// ("cat" names pets), "" for any other key: set_fact and clear_fact of
// such an alias would replace or delete the whole list, not an item.
func factKey(key string) (k, listOf string, err error) {
	t := strings.TrimSpace(key)
	if !isASCII(t) {
		// Latin letters with accents and compatibility characters spelled
		// as the model extractor spells them (größe is grosse, a fullwidth
		// Ｎａｍｅ name), so that extraction replaces the fact later.
		if folded, ok := factkey.FoldLatin(t); ok {
			t = folded
		}
	}
	if isASCII(t) {
		if events.SnakeKeyTooLong(t) {
			// Cut to its first 64 bytes it would be another key's fact
			// (two long keys alike in their start were one).
			return "", "", fmt.Errorf("key %q is over %d characters in snake_case: use a shorter key", key, events.MaxSnakeKeyBytes)
		}
		k = events.SnakeKey(t)
	} else {
		k = lowerKey(t)
	}
	if k == "" {
		return key, "", nil // the service names the missing or unusable key
	}
	canonical, list := events.CanonicalFactKey(k)
	if list && canonical != k {
		listOf = canonical
	}
	return canonical, listOf, nil
}

// lowerKey is a key of another script than Latin: in lower case, runs of
// spaces and hyphens an underscore.
func lowerKey(t string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return r == '-' || unicode.IsSpace(r) }), "_")
}

// earlierKeys are the keys an earlier memoryd stored a fact tool's key
// under, other than key (factKey's): in lower case with accents kept (a
// non-ASCII key before the Latin fold), and as written.
func earlierKeys(in, key string) []string {
	var out []string
	for _, k := range []string{lowerKey(strings.TrimSpace(in)), strings.TrimSpace(in)} {
		if k != "" && k != key && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// knownKeys lists the vocabulary's keys for set_fact's description, list
// keys marked.
var knownKeys = func() string {
	var keys []string
	for _, k := range events.FactKeys() {
		if k.List {
			keys = append(keys, k.Key+" (list)")
		} else {
			keys = append(keys, k.Key)
		}
	}
	return strings.Join(keys, ", ")
}()

// listKeys names the vocabulary's list keys, for the refusal of an array
// value for another key.
var listKeys = func() string {
	var keys []string
	for _, k := range events.FactKeys() {
		if k.List {
			keys = append(keys, k.Key)
		}
	}
	return strings.Join(keys, ", ")
}()

// withinBytes is items up to the one whose question and answer would take
// their text over max bytes, the first always (a result of nothing would
// say nothing of why).
func withinBytes(items []events.ContextItem, max int) []events.ContextItem {
	n := 0
	for i, it := range items {
		n += len(it.Question) + len(it.Answer)
		if n > max && i > 0 {
			return items[:i]
		}
	}
	return items
}

// parseTime reads a time argument: RFC 3339, the same without its zone
// (UTC), or a date, which is its day in UTC, the day included (since: its
// start; until: the next day's start); "" is none (the zero time). Models
// write a date for "in November" as often as a time (an MCP walk).
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time such as 2026-11-01T00:00:00Z, nor a date such as 2026-11-01", field, s)
	}
	if field == "until" {
		t = t.AddDate(0, 0, 1)
	}
	return t, nil
}

func memories(items []events.ContextItem) []memory {
	out := make([]memory, 0, len(items))
	for _, it := range items {
		out = append(out, memory{ID: it.ID, Question: it.Question, Answer: it.Answer, Score: it.Score,
			CreatedAt: it.CreatedAt.UTC().Format(time.RFC3339)})
	}
	return out
}

func wireFact(f events.Fact) fact {
	return fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt.UTC().Format(time.RFC3339)}
}

// A cursor is the last listed item's CREATED_AT,ID (the CLI's --after).
func formatCursor(c events.ContextCursor) string {
	return c.CreatedAt.UTC().Format(time.RFC3339Nano) + "," + strconv.FormatInt(c.ID, 10)
}

func parseCursor(s string) (events.ContextCursor, error) {
	at, id, ok := strings.Cut(s, ",")
	t, err1 := time.Parse(time.RFC3339Nano, at)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return events.ContextCursor{}, fmt.Errorf("cursor %q is not a next_cursor list_memories returned", s)
	}
	return events.ContextCursor{CreatedAt: t, ID: n}, nil
}

// warnings passes on the SDK's warnings and errors only: it logs every
// session's start and end at info, which over HTTP is one line per client.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

// Handle logs the SDK's "server run cancelled", at Error, at Info: it is
// the routine end of a stdio session that ServeIO's caller stopped
// (SIGTERM), and tripped alerts on errors. The SDK's errors of a client's
// request that are the client's mistake (clientErrors) are logged at Warn:
// any key holder could write an error line a request (an MCP walk: the
// TypeScript SDK's client calling a tool after terminateSession()).
func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "server run cancelled" && r.Level > slog.LevelInfo {
		if !w.Handler.Enabled(ctx, slog.LevelInfo) {
			return nil
		}
		r.Level = slog.LevelInfo
	}
	if clientErrors[r.Message] && r.Level > slog.LevelWarn {
		r.Level = slog.LevelWarn
	}
	return w.Handler.Handle(ctx, r)
}

// clientErrors are the SDK's error log messages of a request the client
// got wrong, which it answers with an error: a call before initialize, a
// method the protocol version it asked for removed.
var clientErrors = map[string]bool{
	"method invalid during initialization": true,
	"method removed in the new protocol":   true,
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(name string) slog.Handler    { return warnings{w.Handler.WithGroup(name)} }
