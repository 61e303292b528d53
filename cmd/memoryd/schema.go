package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// wireSchemas names every wire type: the turn event, and each endpoint's
// request and reply (file names match the endpoints' micro metadata).
func wireSchemas() map[string]any {
	return map[string]any{
		"turn_event":          events.Turn{},
		"enrich.request":      events.EnrichRequest{},
		"enrich.reply":        events.EnrichReply{},
		"search.request":      events.SearchRequest{},
		"search.reply":        events.SearchReply{},
		"store.request":       events.StoreRequest{},
		"store.reply":         events.StoreReply{},
		"clear.request":       events.ClearRequest{},
		"clear.reply":         events.DeletedReply{},
		"facts_set.request":   events.SetFactRequest{},
		"facts_set.reply":     events.SetFactReply{},
		"facts_get.request":   events.FactRequest{},
		"facts_get.reply":     events.Fact{},
		"facts_clear.request": events.FactRequest{},
		"facts_clear.reply":   events.DeletedReply{},
		"facts_list.request":  events.FactsListRequest{},
		"facts_list.reply":    events.FactsReply{},
		"stats.request":       events.UserRequest{},
		"stats.reply":         events.StatsReply{},
		"forget.request":      events.UserRequest{},
		"forget.reply":        events.ForgetReply{},
		// Issue 16 item 7: context items by id.
		"context_list.request":   events.ContextListRequest{},
		"context_list.reply":     events.ContextListReply{},
		"context_get.request":    events.ContextItemRequest{},
		"context_get.reply":      events.ContextItem{},
		"context_update.request": events.ContextUpdateRequest{},
		"context_update.reply":   events.ContextItem{},
		"context_delete.request": events.ContextItemRequest{},
		"context_delete.reply":   events.DeletedReply{},
		// Provenance (issue 16, item 6).
		"facts_history.request": events.FactHistoryRequest{},
		"facts_history.reply":   events.FactHistoryReply{},
		// Export and import (issue 16 item 7).
		"export.request": events.ExportRequest{},
		"export.reply":   events.ExportReply{},
		"import.request": events.ImportRequest{},
		"import.reply":   events.ImportReply{},
		// Languages (issue 17 item 6).
		"language.request": events.LanguageRequest{},
		"language.reply":   events.LanguageReply{},
		// Knowledge bases (issue 19); the shared scope's endpoints take the
		// same bodies.
		"docs_put.request":    events.DocsPutRequest{},
		"docs_put.reply":      events.DocsPutReply{},
		"docs_delete.request": events.DocsDeleteRequest{},
		"docs_delete.reply":   events.DocsDeleteReply{},
		"docs_list.request":   events.DocsListRequest{},
		"docs_list.reply":     events.DocsListReply{},
		"docs_search.request": events.DocsSearchRequest{},
		"docs_search.reply":   events.DocsSearchReply{},
		// Memory change events (issue 20 item 4), published by memoryd.
		"change": events.Change{},
		// A user's default collections (issue 19 leftovers).
		"docs_defaults.request": events.DocsDefaultsRequest{},
		"docs_defaults.reply":   events.DocsDefaultsReply{},
	}
}

// fieldRule is what the service enforces on one field beyond its JSON type,
// stated with the validation code's own constants so that the schemas
// cannot drift from it (TestSchemasMatchValidation probes each rule against
// events.Decode and a running enricher).
type fieldRule struct {
	// optional: senders may leave the field out although its Go field has
	// no omitempty.
	optional bool
	// nonBlank: the text must hold a non-space character.
	nonBlank bool
	// maxBytes bounds the text's UTF-8 length (0: no limit).
	maxBytes int
	// minimum and maximum bound a number (nil: no bound).
	minimum, maximum any
	// enum lists the accepted values.
	enum []any
	// years: a time whose year must be 1970..9999, in the shape the
	// service parses, stated as a pattern (format date-time leaves the
	// year open, and most validators do not assert it).
	years bool
	// description says what JSON Schema cannot express.
	description string
}

// yearPattern matches an RFC 3339 time of the years 1970..9999, with the
// shape the service takes: T and Z in capitals, offsets 00..23:00..59.
// format date-time alone is an annotation to most validators (JSON
// Schema 2020-12's default), which would pass a lowercase "t" that makes
// a turn a dead letter. The service's year is UTC's (events.CheckTime),
// so 1969-12-31 behind UTC is taken too: it may be 1970 there.
const yearPattern = `^((19[7-9][0-9]|[2-9][0-9]{3})-[0-9]{2}-[0-9]{2}` + clockPattern + `(Z|[+-]` + offsetPattern + `)` +
	`|1969-12-31` + clockPattern + `-` + offsetPattern + `)$`

// clockPattern and offsetPattern are yearPattern's time of day (T in
// capitals) and offset hours and minutes.
const (
	clockPattern  = `T[0-9]{2}:[0-9]{2}:[0-9]{2}([.,][0-9]+)?`
	offsetPattern = `([01][0-9]|2[0-3]):[0-5][0-9]`
)

// timeText is how the time fields' descriptions start.
const timeText = "RFC 3339 with T and Z in capitals (offset hours 00..23, minutes 00..59), year 1970 to 9999 in UTC"

// rootRule is the key of a schema's own description in fieldRules.
const rootRule = ""

// userIDRule is user_id in every request: checkUser's rules.
var userIDRule = fieldRule{nonBlank: true, maxBytes: events.MaxUserIDBytes,
	description: "must map to the user token of the subject the request is sent to"}

var factKeyRule = fieldRule{nonBlank: true, maxBytes: events.MaxFactKeyBytes,
	description: "leading and trailing white space is ignored"}

var maxResultsRule = fieldRule{minimum: 1, maximum: events.MaxMaxResults}

// The documents endpoints' identity: one of user_id and scope, as the
// subject says.
var (
	docsUserRule   = fieldRule{nonBlank: true, maxBytes: events.MaxUserIDBytes, description: "must map to the user token of the subject the request is sent to; on a shared scope's subject (<prefix>.shared.docs.<op>.<scope>) it is the scope: letters, digits, _ and -, at most 64 bytes"}
	collectionRule = fieldRule{nonBlank: true, maxBytes: store.MaxNameBytes, description: "letters, digits, _ and -"}
)

// fieldRules holds each schema's rules by JSON field name.
var fieldRules = map[string]map[string]fieldRule{
	"change": {
		rootRule: {description: "Published by memoryd on <prefix>.changes.<user-token> after the change committed (docs/protocol.md, Memory changes). Delivered at least once, while subscribed; seq numbers the user's changes in commit order."},
		"seq":    {minimum: 1, description: "the user's changes numbered from 1 in commit order, without gaps, never going back (memory.forgotten too numbers after the changes before it). A seq at or below the last one seen is a duplicate; a jump is a gap: re-read the memory"},
		"type": {enum: []any{events.ChangeFactSet, events.ChangeFactRemoved, events.ChangeContextStored, events.ChangeContextUpdated,
			events.ChangeContextDeleted, events.ChangeContextCleared, events.ChangeMemoryImported, events.ChangeMemoryReset, events.ChangeMemoryForgotten}},
		"at":        {description: "RFC 3339: when the change committed"},
		"event_id":  {description: "the turn the change was extracted from; absent for direct writes and summaries"},
		"old_value": {description: "fact.set: the value replaced (absent for a new fact); fact.removed: the value deleted"},
		"id":        {description: "the context item (context.*)"},
		"count":     {description: "context.cleared: items deleted; memory.imported: rows the import wrote"},
		"truncated": {description: "true: the change was too large for one NATS message and comes without question, answer, value and old_value; read them with facts.get or context.get"},
	},
	"turn_event": {
		rootRule: {description: fmt.Sprintf("Under %d bytes with the message's headers: the stream memoryd creates refuses a larger message at publish. Text must be valid UTF-8 without NUL characters.",
			events.MaxEventBytes)},
		"id":                 {nonBlank: true, maxBytes: events.MaxIDBytes},
		"user_id":            {nonBlank: true, maxBytes: events.MaxUserIDBytes},
		"conversation_id":    {maxBytes: events.MaxConversationIDBytes},
		"user_message":       {nonBlank: true, maxBytes: events.MaxUserMessageBytes},
		"assistant_response": {optional: true, maxBytes: events.MaxAssistantResponseBytes},
		"timestamp":          {years: true, description: timeText},
		"metadata": {description: fmt.Sprintf("a JSON object of at most %d bytes, nested at most %d levels deep",
			events.MaxMetadataBytes, events.MaxMetadataDepth)},
		"scope": {maxBytes: events.MaxScopeBytes, description: "the context items extracted from the turn carry it; absent or empty: no scope"},
	},
	"enrich.request": {
		"user_id":     userIDRule,
		"message":     {nonBlank: true, maxBytes: events.MaxMessageBytes},
		"max_results": maxResultsRule,
		"threshold":   {minimum: 0, maximum: 1},
		"max_tokens":  {minimum: 1, maximum: events.MaxMaxTokens},
		"at":          {years: true, description: timeText + "; absent means now"},
		"format": {enum: []any{"", events.FormatInline, events.FormatSystem, events.FormatMarkdown},
			description: "empty or absent means inline"},
		// Issue 16 item 5: which facts enrich injects.
		"facts": {enum: []any{"", events.FactsRelevant, events.FactsAll},
			description: "empty or absent means relevant: the core facts and those sharing a keyword with the message"},
		"scope": scopeRule,
		// Issue 19: document chunks beside facts and memories.
		"collections": {optional: true, description: fmt.Sprintf("the document collections whose chunks to include: the user's own and shared ones they are granted; at most %d names, each non-blank and at most %d bytes; absent or null: the user's default collections (memory.docs.defaults); []: no documents",
			events.MaxEnrichCollections, events.MaxCollectionNameBytes)},
		"docs_max_results": {minimum: 1, maximum: events.MaxMaxResults, description: fmt.Sprintf("most document chunks; absent means %d", events.DefaultDocsMaxResults)},
		"docs_threshold":   {minimum: 0, maximum: 1, description: fmt.Sprintf("lowest score of a document chunk; absent means %v", events.DefaultDocsThreshold)},
	},
	"search.request": {
		"user_id":     userIDRule,
		"query":       {nonBlank: true, maxBytes: events.MaxMessageBytes},
		"max_results": maxResultsRule,
		"scope":       scopeRule,
		// Issue 17 item 5: a range of the items' creation times.
		"since": {years: true, description: timeText + ": only items created at or after it; absent: no lower bound; must be before until"},
		"until": {years: true, description: timeText + ": only items created before it; absent: no upper bound"},
	},
	"store.request": {
		"user_id":  userIDRule,
		"question": {nonBlank: true, maxBytes: events.MaxQuestionBytes},
		"answer":   {optional: true, maxBytes: events.MaxAnswerBytes},
	},
	"clear.request": {
		rootRule:   {description: `Say what to delete: "id", "question" (both: the item matching both), or "all": true alone.`},
		"user_id":  userIDRule,
		"id":       {minimum: 0, description: "0 or absent: not a condition"},
		"question": {optional: true, maxBytes: events.MaxQuestionBytes, description: "without a NUL character"},
	},
	"facts_set.request": {
		"user_id": userIDRule,
		"key":     factKeyRule,
		"value":   {nonBlank: true, maxBytes: events.MaxFactValueBytes},
	},
	"facts_get.request":   {"user_id": userIDRule, "key": factKeyRule},
	"facts_clear.request": {"user_id": userIDRule, "key": factKeyRule},
	"facts_list.request": {
		"user_id": userIDRule,
		"after":   {description: "a previous reply's next, to continue after it; absent starts at the most recently set fact"},
	},
	"stats.request":  {"user_id": userIDRule},
	"forget.request": {"user_id": userIDRule},
	// Issue 16 item 7: context items by id.
	"context_list.request": {
		"user_id": userIDRule,
		"limit":   {minimum: 1, maximum: events.MaxContextPage},
		"after":   {description: "a previous reply's next, to continue after it; absent starts at the newest item"},
		"scope":   scopeRule,
	},
	"context_get.request": {"user_id": userIDRule, "id": contextIDRule},
	"context_update.request": {
		rootRule:   {description: `Say what to change: "question", "answer" or both.`},
		"user_id":  userIDRule,
		"id":       contextIDRule,
		"question": {nonBlank: true, maxBytes: events.MaxQuestionBytes},
		"answer":   {maxBytes: events.MaxAnswerBytes},
	},
	"context_delete.request": {"user_id": userIDRule, "id": contextIDRule},
	"facts_history.request": {
		"user_id":     userIDRule,
		"key":         factKeyRule,
		"max_results": {minimum: 1, maximum: events.MaxHistoryResults, description: fmt.Sprintf("absent means %d", events.DefaultHistoryResults)},
		"before":      {minimum: 0, description: "0 or absent: from the newest change; else the next_before of the previous page"},
	},
	// Export and import (issue 16 item 7).
	"export.request": {
		"user_id": userIDRule,
		"cursor":  {maxBytes: events.MaxCursorBytes, description: "a previous reply's next, to continue; absent starts at the header. A cursor whose copy is gone (unread for an hour, or the user was forgotten) is a 409: start again"},
	},
	// Languages (issue 17 item 6).
	"language.request": {
		"user_id": userIDRule,
		"language": {enum: languageEnum(),
			description: "absent or empty reads the language; else the new one: an ISO 639-1 code, an English name or simple (docs/protocol.md, Languages)"},
	},
	// Knowledge bases (issue 19).
	"docs_put.request": {
		rootRule:     {description: "Sent to <prefix>.docs.put.<user-token>, or <prefix>.shared.docs.put.<scope> for a shared scope's collection. A request must also fit the NATS server's max_payload."},
		"user_id":    docsUserRule,
		"collection": collectionRule,
		"doc_id":     {maxBytes: store.MaxDocIDBytes, description: "the source when absent; one of doc_id and source is required"},
		"source":     {maxBytes: store.MaxDocIDBytes, description: "the doc_id when absent; a name of source code or configuration by its extension or name (store.go, app.py, Dockerfile, my.ini, .env), or an extensionless name of content opening with #!, has the content chunked as code"},
		"content":    {description: "text, Markdown or source code (see source), UTF-8 without NUL; at most serve's --max-document-bytes (default 8 MiB)"},
		"metadata":   {description: fmt.Sprintf("a JSON object of at most %d bytes", store.MaxMetadataBytes)},
		"chunk_tokens": {minimum: 0, maximum: chunker.MaxMaxTokens,
			description: fmt.Sprintf("used when the put creates the collection: 0 or absent means %d, else %d..%d; a later put naming another size is refused", chunker.DefaultMaxTokens, chunker.MinMaxTokens, chunker.MaxMaxTokens)},
		"overlap_tokens": {minimum: 0, description: fmt.Sprintf("used when the put creates the collection: 0 or absent means %d; more than half of chunk_tokens is cut to half; a later put naming another overlap is refused", chunker.DefaultOverlap)},
	},
	"docs_delete.request": {"user_id": docsUserRule, "collection": collectionRule, "doc_id": {nonBlank: true, maxBytes: store.MaxDocIDBytes}},
	"docs_list.request": {"user_id": docsUserRule, "collection": collectionRule,
		"after": {maxBytes: store.MaxDocIDBytes, description: "the previous page's next; absent from the start"},
		"limit": {minimum: 0, maximum: events.MaxDocsListLimit, description: fmt.Sprintf("0 or absent means %d", events.DefaultDocsListLimit)}},
	"docs_search.request": {"user_id": docsUserRule,
		"query":       {nonBlank: true, maxBytes: events.MaxMessageBytes},
		"collections": {description: fmt.Sprintf("at most %d; a name for the caller's own collection, scope/name for a shared scope's the user was granted; absent: every collection the caller may read", events.MaxDocsCollections)},
		"max_results": maxResultsRule,
		"threshold":   {minimum: 0, maximum: 1}},
	"docs_defaults.request": {
		rootRule:      {description: "Sent to <prefix>.docs.defaults.<user-token> (a user's subject only)."},
		"user_id":     userIDRule,
		"collections": {optional: true, description: fmt.Sprintf("at most %d names, each readable by the user now; present: replaces the defaults ([] clears them); absent or null: only reads them", events.MaxEnrichCollections)}},
	"import.request": {
		rootRule:  {description: fmt.Sprintf("Each request is an import of its own, atomic; at most %d bytes of lines.", events.MaxImportRequestBytes)},
		"user_id": userIDRule,
		"lines":   {description: "required: the export's lines as JSON objects, the header " + events.ExportHeader + " first"},
		"memory_id": {maxBytes: events.MaxMemoryIDBytes,
			description: "the memory_id the first request of the same import was answered with: a 409 when the user was forgotten since; absent: any memory"},
	},
}

// languageEnum is "" (read) and every language memory.language accepts.
func languageEnum() []any {
	out := []any{""}
	for _, l := range events.Languages() {
		out = append(out, l)
	}
	return out
}

// scopeRule is the optional scope of enrich, search and context.list.
var scopeRule = fieldRule{maxBytes: events.MaxScopeBytes,
	description: "only the context items of this scope; absent or empty: all the user's items"}

// contextIDRule is a context item id in a request that names one.
var contextIDRule = fieldRule{minimum: 1}

// inbound reports whether a schema describes what memoryd receives. The
// service decodes with encoding/json, which takes null as absent, so an
// optional field of an inbound message also accepts null.
func inbound(name string) bool {
	return name == "turn_event" || strings.HasSuffix(name, ".request")
}

// schemaFor builds a JSON Schema (draft 2020-12) from a Go type's JSON
// encoding and the schema's fieldRules: fields without omitempty/omitzero
// are required unless a rule says optional, unknown properties are allowed
// (receivers ignore them).
func schemaFor(name string, v any) map[string]any {
	rules := fieldRules[name]
	s := typeSchema(reflect.TypeOf(v), rules)
	if inbound(name) {
		required := s["required"]
		for field, p := range s["properties"].(map[string]any) {
			if r, _ := required.([]string); !slices.Contains(r, field) {
				allowNull(p.(map[string]any))
			}
		}
	}
	if d := rules[rootRule].description; d != "" {
		s["description"] = d
	}
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = enricher.SchemaBase + name + ".json"
	s["title"] = "memoryd " + name
	return s
}

// allowNull adds null to a property's type (and enum).
func allowNull(p map[string]any) {
	switch t := p["type"].(type) {
	case string:
		p["type"] = []any{t, "null"}
	case []any:
		if !slices.Contains(t, any("null")) {
			p["type"] = append(t, "null")
		}
	}
	if e, ok := p["enum"].([]any); ok && !slices.Contains(e, nil) {
		p["enum"] = append(e, nil)
	}
}

// applyRule adds a field's rule to its schema.
func applyRule(p map[string]any, r fieldRule) {
	if r.nonBlank {
		p["minLength"] = 1
		p["pattern"] = `\S`
	}
	desc := r.description
	if r.maxBytes > 0 {
		// maxLength counts characters; the limit is in bytes, which
		// multi-byte text reaches sooner, so the description says so.
		p["maxLength"] = r.maxBytes
		desc = strings.TrimPrefix(desc+fmt.Sprintf("; at most %d bytes of UTF-8", r.maxBytes), "; ")
	}
	if r.minimum != nil {
		p["minimum"] = r.minimum
	}
	if r.maximum != nil {
		p["maximum"] = r.maximum
	}
	if r.enum != nil {
		p["enum"] = slices.Clone(r.enum)
	}
	if r.years {
		p["pattern"] = yearPattern
	}
	if desc != "" {
		p["description"] = desc
	}
}

var timeType = reflect.TypeFor[time.Time]()

// typeSchema is t's schema; rules apply to t's fields when t is a struct.
func typeSchema(t reflect.Type, rules map[string]fieldRule) map[string]any {
	nullable := false
	if t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	var s map[string]any
	switch {
	case t == timeType:
		s = map[string]any{"type": "string", "format": "date-time"}
	case t == reflect.TypeFor[json.RawMessage]():
		s = map[string]any{"type": "object"}
		nullable = true
	case t.Kind() == reflect.String:
		s = map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		s = map[string]any{"type": "boolean"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s = map[string]any{"type": "integer"}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s = map[string]any{"type": "number"}
	case t.Kind() == reflect.Slice:
		s = map[string]any{"type": "array", "items": typeSchema(t.Elem(), nil)}
	case t.Kind() == reflect.Map:
		s = map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), nil)}
	case t.Kind() == reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			p := typeSchema(f.Type, nil)
			r := rules[name]
			applyRule(p, r)
			if why := f.Tag.Get("deprecated"); why != "" {
				p["deprecated"], p["description"] = true, "Deprecated: "+why
			}
			props[name] = p
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && !r.optional {
				required = append(required, name)
			}
		}
		s = map[string]any{"type": "object", "properties": props, "additionalProperties": true}
		if len(required) > 0 {
			s["required"] = required
		}
	default:
		panic(fmt.Sprintf("schema: unsupported type %s", t))
	}
	if nullable {
		s["type"] = []any{s["type"], "null"}
	}
	return s
}

// renderSchemas returns every schema file's content by file name.
func renderSchemas() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, v := range wireSchemas() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(schemaFor(name, v)); err != nil {
			return nil, err
		}
		out[name+".json"] = buf.Bytes()
	}
	return out, nil
}

// moduleLine is go.mod's module directive of this repository.
const moduleLine = "module github.com/memoryd/memoryd"

// defaultSchemaDir returns the repository's docs/schemas when dir is inside
// a memoryd checkout (the nearest go.mod, from dir upwards, is memoryd's),
// and an error otherwise, so that `memoryd schemas` run anywhere else never
// creates a docs/ folder there.
func defaultSchemaDir(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range strings.Lines(string(data)) {
				if strings.TrimSpace(line) == moduleLine {
					return filepath.Join(d, "docs", "schemas"), nil
				}
			}
			return "", fmt.Errorf("%s is another module's, not memoryd's: pass --out DIR", filepath.Join(d, "go.mod"))
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside the memoryd repository: pass --out DIR", dir)
		}
	}
}

func runSchemas(_ context.Context, a *cli, args []string) error {
	var dir string
	f := newFlags("schemas", "Usage: memoryd schemas [--out DIR]\n\nWrites the JSON Schemas of the turn event and of every request and reply, generated from the Go types.")
	f.ArgString(&dir, "out", "", "directory to write to, created if missing (empty: docs/schemas of the memoryd repository around the current directory; elsewhere --out is required)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (use --out DIR)", f.Arg(0))
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if dir, err = defaultSchemaDir(wd); err != nil {
			return err
		}
	}
	files, err := renderSchemas()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "%d schemas written to %s\n", len(files), dir)
	return nil
}
