package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

func TestUserToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id    string
		plain bool
	}{
		{"alice", true},
		{"Alice_01-x", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"bob@example.com", false},
		{"a.b", false},
		{"a b", false},
		{"*", false},
		{">", false},
		{"ünï", false},
		{strings.Repeat("x", 1000), false},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		tok := events.UserToken(tt.id)
		if (tok == tt.id) != tt.plain {
			t.Errorf("UserToken(%q) = %q; plain = %v, want %v", tt.id, tok, tok == tt.id, tt.plain)
		}
		if strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" || len(tok) > 64 {
			t.Errorf("UserToken(%q) = %q is not a safe subject token", tt.id, tok)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share token %q", other, tt.id, tok)
		}
		seen[tok] = tt.id
		if events.UserToken(tt.id) != tok {
			t.Errorf("UserToken(%q) is not deterministic", tt.id)
		}
	}
	// The examples in protocol.md "The user token", which clients in
	// other languages check themselves against.
	for id, want := range map[string]string{
		"alice@example.com": "~76gzqgp4byjl6djerexelgd6esncrxhig2ufzlla4khkvkgg3f3a",
		"田中@example.jp":     "~u2ztravtxb57q6yhmbrd4skr6fsnscpg5lhpwwtrcwkn3e6u5m5a",
	} {
		if got := events.UserToken(id); got != want {
			t.Errorf("UserToken(%q) = %q, want the documented %q", id, got, want)
		}
	}
	// A hashed token can never be claimed by a plain id.
	hashed := events.UserToken("bob@example.com")
	if events.UserToken(hashed) == hashed {
		t.Errorf("plain id %q maps to a hashed token", hashed)
	}
}

func TestTokenFromSubject(t *testing.T) {
	t.Parallel()
	tests := []struct{ subject, want string }{
		{"memory.turns.alice", "alice"},
		{"memory.turns.~abc", "~abc"},
		{"memory.turns.a.b", ""},
		{"memory.turns.", ""},
		{"other.turns.alice", ""},
		{"memory.enrich.alice", ""},
	}
	for _, tt := range tests {
		if got := events.TokenFromSubject("memory", tt.subject); got != tt.want {
			t.Errorf("TokenFromSubject(%q) = %q, want %q", tt.subject, got, tt.want)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	const ok = `"id":"e1","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"`
	tests := []struct {
		name  string
		data  string
		field string // "" with wantErr false: valid
		bad   bool
	}{
		{"valid", `{` + ok + `}`, "", false},
		{"unknown fields ignored", `{` + ok + `,"extra":{"x":[1,2]}}`, "", false},
		{"memory false", `{` + ok + `,"memory":false}`, "", false},
		{"metadata object", `{` + ok + `,"metadata":{"a":{"b":1}}}`, "", false},
		{"not json", `hello`, "", true},
		{"empty", ``, "", true},
		{"missing id", `{"user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "id", true},
		{"blank message", `{"id":"e1","user_id":"alice","user_message":"  ","timestamp":"2026-11-21T10:00:00Z"}`, "user_message", true},
		{"missing timestamp", `{"id":"e1","user_id":"alice","user_message":"hi"}`, "timestamp", true},
		// Well-formed JSON with a field of the wrong type names the field.
		{"number as string field", `{"id":1,"user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "id", true},
		{"string as bool", `{` + ok + `,"memory":"no"}`, "memory", true},
		{"timestamp not RFC 3339", `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":"yesterday"}`, "timestamp", true},
		{"timestamp a number", `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":1732183200}`, "timestamp", true},
		{"metadata not object", `{` + ok + `,"metadata":"x"}`, "metadata", true},
		{"metadata too deep", `{` + ok + `,"metadata":` + strings.Repeat(`{"a":`, 20) + `1` + strings.Repeat(`}`, 20) + `}`, "metadata", true},
		{"nul byte", `{"id":"e1","user_id":"alice","user_message":"a\u0000b","timestamp":"2026-11-21T10:00:00Z"}`, "user_message", true},
		{"invalid utf8", "{\"id\":\"e1\",\"user_id\":\"\xff\",\"user_message\":\"hi\",\"timestamp\":\"2026-11-21T10:00:00Z\"}", "", true},
		{"huge message", `{"id":"e1","user_id":"alice","user_message":"` + strings.Repeat("x", 1<<20) + `","timestamp":"2026-11-21T10:00:00Z"}`, "", true},
		{"long user id", `{"id":"e1","user_id":"` + strings.Repeat("u", 300) + `","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "user_id", true},
		// JSON decoders read an unpaired surrogate escape as U+FFFD
		// without an error: "\ud800" and "\udfff" were one user (an
		// identity walk). So is U+FFFD sent as such.
		{"user id with a lone surrogate", `{"id":"e1","user_id":"x\ud800","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "user_id", true},
		{"user id with half an emoji", `{"id":"e1","user_id":"x\ud83d","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "user_id", true},
		{"user id with U+FFFD", `{"id":"e1","user_id":"x\ufffd","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "user_id", true},
		{"user id with a whole emoji", `{"id":"e1","user_id":"x\ud83d\ude00","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`, "", false},
		{"trailing data", `{` + ok + `}{}`, "", true},
		{"trailing brackets", `{` + ok + `}}}]]`, "", true},
		// A field twice, in any case: encoding/json would keep the last,
		// most other parsers the exact spelling.
		{"memory twice in two cases", `{` + ok + `,"memory":false,"Memory":true}`, "memory", true},
		{"memory twice", `{` + ok + `,"memory":false,"memory":true}`, "memory", true},
		{"id twice in two cases", `{` + ok + `,"ID":"c2"}`, "id", true},
		{"scope with a long s", `{` + ok + `,"scope":"a","ſcope":"b"}`, "scope", true},
		{"unknown field twice", `{` + ok + `,"extra":1,"Extra":2}`, "", false},
		{"array", `[{` + ok + `}]`, "", true},
		{"string", `"hi"`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn, err := events.Decode([]byte(tt.data))
			if tt.bad && strings.Contains(fmt.Sprint(err), "events.") {
				t.Errorf("error names a Go type: %v", err)
			}
			if !tt.bad {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if turn.ID != "e1" || !turn.Timestamp.Equal(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)) {
					t.Fatalf("decoded %+v", turn)
				}
				return
			}
			if !errors.Is(err, events.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			var ve *events.ValidationError
			if tt.field != "" && (!errors.As(err, &ve) || ve.Field != tt.field) {
				t.Fatalf("err = %v, want field %q", err, tt.field)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"id":"e1","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}`))
	f.Add([]byte(`{"id":"e1","user_id":"a b","user_message":"hi","timestamp":"2026-11-21T10:00:00Z","metadata":{"x":[{}]}}`))
	f.Add([]byte("{\"id\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		turn, err := events.Decode(data)
		if err != nil {
			if !errors.Is(err, events.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if err := turn.Validate(); err != nil {
			t.Fatalf("decoded turn fails validation: %v", err)
		}
		if tok := events.UserToken(turn.UserID); strings.ContainsAny(tok, ".*> ") {
			t.Fatalf("unsafe token %q", tok)
		}
	})
}

func TestPublisherDeduplicatesByEventID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, prefix)
	turn := events.Turn{ID: "e1", UserID: "bob@example.com", UserMessage: "hi", Timestamp: time.Now()}
	first, err := pub.Publish(ctx, turn)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pub.Publish(ctx, turn)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate {
		t.Fatalf("duplicate flags = %v, %v; want false, true", first.Duplicate, again.Duplicate)
	}
	msg, err := s.GetLastMsgForSubject(ctx, events.TurnSubject(prefix, turn.UserID))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(jetstream.MsgIDHeader) != events.UserToken(turn.UserID)+":e1" {
		t.Fatalf("Nats-Msg-Id = %q", msg.Header.Get(jetstream.MsgIDHeader))
	}
	if _, err := pub.Publish(ctx, events.Turn{ID: "e2", UserID: "x"}); !errors.Is(err, events.ErrInvalid) {
		t.Fatalf("invalid turn published: %v", err)
	}
}

// TestContractNames pins the names docs/protocol.md documents, which the
// service, its tools and frontends take from events.
func TestContractNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{events.DefaultPrefix, "memory"},
		{events.DefaultStream, "MEMORY_TURNS"},
		{events.DefaultDeadLetterStream, "MEMORY_TURNS_DEADLETTER"},
		{events.DeadLetterStream("T1_TURNS"), "T1_TURNS_DEADLETTER"},
		{events.DeadLetterSubject("memory", "alice"), "memory.deadletter.alice"},
		{events.DeadLetterSubject("memory", ""), "memory.deadletter._"},
		{events.DeadLetterSubjects("memory"), "memory.deadletter.>"},
		{events.TurnSubject("memory", "alice"), "memory.turns.alice"},
		{events.TurnSubjects("memory"), "memory.turns.>"},
		{events.HeaderReason, "Memoryd-Reason"},
		{events.HeaderOriginalSubject, "Memoryd-Original-Subject"},
		{events.HeaderStreamSeq, "Memoryd-Stream-Seq"},
		{events.HeaderUserToken, "Memoryd-User-Token"},
		{events.FactsMarker, "[facts:"},
		{events.ContextMarker, "[context:"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("name %d = %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestCheckPrefixAndStream(t *testing.T) {
	for _, c := range []struct {
		prefix string
		ok     bool
	}{
		{"memory", true}, {"acme.memory", true}, {"m-1_x", true},
		{"", false}, {"bad prefix", false}, {"a..b", false}, {".a", false}, {"a.", false}, {"a.*", false}, {"a.>", false}, {"a\tb", false},
	} {
		if err := events.CheckPrefix(c.prefix); (err == nil) != c.ok {
			t.Errorf("CheckPrefix(%q) = %v, want ok %v", c.prefix, err, c.ok)
		}
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"MEMORY_TURNS", true}, {"walk-turns", true},
		{"", false}, {"A B", false}, {"A.B", false}, {"A*", false}, {"A>", false}, {"a/b", false}, {strings.Repeat("x", 245), false}, {strings.Repeat("x", 244), true},
	} {
		if err := events.CheckStream(c.name); (err == nil) != c.ok {
			t.Errorf("CheckStream(%q) = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestEnsureStreamNamesTheStreamHoldingThePrefix: a prefix whose turn
// subjects are in a stream of another name than the one asked for (the
// operator's --stream left out) is refused naming that stream.
func TestEnsureStreamNamesTheStreamHoldingThePrefix(t *testing.T) {
	t.Parallel()
	ctx, js, prefix, stream := setupStream(t)
	_, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream + "_OTHER"})
	if err == nil || !strings.Contains(err.Error(), "are in stream "+stream+" already") {
		t.Fatalf("ensure a second stream for prefix %s: %v; want the error to name %s", prefix, err, stream)
	}
}

// TestDecodeTimestampRange: a turn's timestamp is held to RFC 3339 and
// the years 1970..9999, as a request's times are: Go's parser takes an
// offset hour of 24 and a minute of 60, and the zero time sent is year 1,
// not a timestamp missing.
func TestDecodeTimestampRange(t *testing.T) {
	t.Parallel()
	turn := func(ts string) string {
		return `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":` + ts + `}`
	}
	for _, tt := range []struct{ ts, want string }{
		{`"2026-11-21T10:00:00+24:00"`, "timestamp: UTC offset +24:00 is out of range (RFC 3339 hours are 00..23)"},
		{`"2026-11-21T10:00:00-24:00"`, "timestamp: UTC offset -24:00 is out of range"},
		{`"2026-11-21T10:00:00+01:60"`, "timestamp: UTC offset +01:60 is out of range (RFC 3339 minutes are 00..59)"},
		{`"2026-11-21T10:00:00-23:60"`, "timestamp: UTC offset -23:60 is out of range"},
		{`"0001-01-01T00:00:00Z"`, "timestamp: year 1 (UTC) is out of range (1970..9999)"},
		{`"1969-12-31T23:59:59Z"`, "timestamp: year 1969 (UTC) is out of range"},
		// 1970 in the offset as sent, 1969 in UTC, where it is stored and
		// exported (an export holding it did not import).
		{`"1970-01-01T00:00:00+01:00"`, "timestamp: year 1969 (UTC) is out of range"},
		{`"9999-12-31T23:00:00-02:00"`, "timestamp: year 10000 (UTC) is out of range"},
		{`null`, "timestamp: is required"},
	} {
		_, err := events.Decode([]byte(turn(tt.ts)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("timestamp %s: %v, want %q", tt.ts, err, tt.want)
		}
	}
	for _, ts := range []string{`"2026-11-21T10:00:00+23:59"`, `"2026-11-21T10:00:00-23:59"`, `"2026-11-21T10:00:00-00:00"`, `"1970-01-01T00:00:00Z"`} {
		if _, err := events.Decode([]byte(turn(ts))); err != nil {
			t.Errorf("timestamp %s: %v", ts, err)
		}
	}
	// A Turn built in Go is held to the same range.
	tr := events.Turn{ID: "e1", UserID: "alice", UserMessage: "hi", Timestamp: time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("", 24*3600))}
	if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), "UTC offset +24:00 is out of range") {
		t.Errorf("Validate with a +24:00 zone: %v", err)
	}
	tr.Timestamp = time.Time{}
	if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), "timestamp: is required") {
		t.Errorf("Validate of an unset timestamp: %v", err)
	}
}

// TestOptedOutCopy: what the dead letter of an invalid event sent with
// memory off keeps: ids cut to their limits, sizes, never the text; and
// which events count as sent with memory off.
func TestOptedOutCopy(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) // 400 bytes
	data := []byte(`{"id":"e1","user_id":"alice","conversation_id":"` + long + `","user_message":"secret one","assistant_response":"secret two",` +
		`"metadata":{"k":"secret three"},"timestamp":"2026-11-21T10:00:00Z","memory":false,"extra":"secret four"}`)
	c, ok := events.OptedOutCopy(data)
	if !ok || strings.Contains(string(c), "secret") {
		t.Fatalf("copy %s, %v; want one without the text", c, ok)
	}
	if c, ok := events.OptedOutCopy([]byte(`{"ID":"e2","User_Message":"secret five","Memory":false}`)); !ok || strings.Contains(string(c), "secret") || !strings.Contains(string(c), `"id":"e2"`) {
		t.Fatalf("copy of an event with capitalised names: %s, %v", c, ok)
	}
	var got struct {
		ID             string         `json:"id"`
		UserID         string         `json:"user_id"`
		ConversationID string         `json:"conversation_id"`
		Timestamp      string         `json:"timestamp"`
		Memory         *bool          `json:"memory"`
		Sizes          map[string]int `json:"sizes"`
	}
	if err := json.Unmarshal(c, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "e1" || got.UserID != "alice" || got.ConversationID != strings.Repeat("é", events.MaxConversationIDBytes/2) ||
		got.Timestamp != "2026-11-21T10:00:00Z" || got.Memory == nil || *got.Memory ||
		got.Sizes["event"] != len(data) || got.Sizes["conversation_id"] != len(long)+2 || got.Sizes["user_message"] != len(`"secret one"`) {
		t.Fatalf("copy %s", c)
	}
	for body, want := range map[string]bool{
		`{"memory":false}`:                 true,
		`{"memory":"false"}`:               true, // not a boolean: the safe reading
		`{"memory":0}`:                     true,
		`{"memory":false} trailing`:        true,
		`{"memory":true,"user_message":1}`: false,
		`{"memory":null}`:                  false,
		`{"user_message":"x"}`:             false,
		`{"memory":false,"user_message":`:  false, // unreadable: says nothing
		`[{"memory":false}]`:               false,
		// Decode reads field names case-insensitively.
		`{"Memory":false,"user_message":"x"}`: true,
		`{"MEMORY":0}`:                        true,
		`{"memory":true,"Memory":false}`:      true, // either may be the one Decode keeps
	} {
		if _, ok := events.OptedOutCopy([]byte(body)); ok != want {
			t.Errorf("OptedOutCopy(%s) opted out %v, want %v", body, ok, want)
		}
	}
}

// RepeatedKey reads the top level of an object as encoding/json would:
// keys folded and unescaped, values of any kind skipped whole, nested
// objects' keys not counted.
func TestRepeatedKey(t *testing.T) {
	fields := []string{"memory", "user_id", "scope"}
	tests := []struct {
		name, data, field, first, second string
	}{
		{"none", `{"memory":false,"user_id":"a"}`, "", "", ""},
		{"empty object", `{ }`, "", "", ""},
		{"twice", `{"memory":false,"memory":true}`, "memory", "memory", "memory"},
		{"two cases", `{"memory":false, "Memory" : true}`, "memory", "memory", "Memory"},
		{"escaped key", `{"memory":false,"\u004demory":true}`, "memory", "memory", "Memory"},
		{"long s folds to s", `{"scope":"a","ſcope":"b"}`, "scope", "scope", "ſcope"},
		{"nested keys do not count", `{"memory":false,"metadata":{"memory":true,"x":[{"Memory":1}]}}`, "", "", ""},
		{"strings holding quotes and brackets", `{"user_id":"a\"}{[,\\","x":"\"memory\":","Memory":true,"memory":false}`, "memory", "Memory", "memory"},
		{"after an array and numbers", "{\"a\":[1,2,{\"b\":\"]\"}],\"n\":-1.5e3,\"t\":true,\"z\":null,\n\"user_id\":\"a\",\"USER_ID\":\"b\"}", "user_id", "user_id", "USER_ID"},
		{"unknown field twice", `{"extra":1,"Extra":2}`, "", "", ""},
		{"not an object", `["memory","memory"]`, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, a, b := events.RepeatedKey([]byte(tt.data), fields)
			if f != tt.field || a != tt.first || b != tt.second {
				t.Errorf("RepeatedKey = %q (%q, %q), want %q (%q, %q)", f, a, b, tt.field, tt.first, tt.second)
			}
		})
	}
}

// TestPublisherCountsHeadersInSize: the 512 KiB limit is on the whole
// message, headers included (docs/protocol.md), so an event whose JSON alone
// is just under it is invalid once Nats-Msg-Id is added: Publish refuses it
// with ErrInvalid before sending, rather than leaving JetStream to answer
// error 10054 after the round trip.
func TestPublisherCountsHeadersInSize(t *testing.T) {
	t.Parallel()
	ctx, js, prefix, _ := setupStream(t)
	turn := events.Turn{ID: "big", UserID: "alice", UserMessage: strings.Repeat(`"`, 60000), Timestamp: time.Now().UTC()}
	data, err := json.Marshal(turn)
	if err != nil {
		t.Fatal(err)
	}
	// Each `"` is two bytes encoded: the JSON ends 7 bytes under the limit.
	turn.AssistantResponse = strings.Repeat(`"`, (events.MaxEventBytes-7-len(data))/2)
	if data, _ = json.Marshal(turn); len(data) > events.MaxEventBytes || len(data) < events.MaxEventBytes-8 {
		t.Fatalf("test event is %d bytes; want just under %d", len(data), events.MaxEventBytes)
	}
	if err := turn.Validate(); err != nil {
		t.Fatalf("the event alone is valid: %v", err)
	}
	_, err = events.NewPublisher(js, prefix).Publish(ctx, turn)
	var apiErr *jetstream.APIError
	if !errors.Is(err, events.ErrInvalid) || errors.As(err, &apiErr) {
		t.Fatalf("Publish of an event over the limit with its headers = %v; want ErrInvalid before sending", err)
	}
}

// setupStream connects to the test's NATS server and makes a turn stream
// of the test's own prefix and name.
func setupStream(t *testing.T) (context.Context, jetstream.JetStream, string, string) {
	t.Helper()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	return ctx, js, prefix, stream
}

// TestPublishWithoutAStreamSaysSo: a turn published under a prefix no
// stream captures (memoryd not running, or running with another prefix)
// is an error that says so and is still jetstream.ErrNoStreamResponse.
// Before, it was only "nats: no response from stream" (a newcomer walk;
// the CLI already said more).
func TestPublishWithoutAStreamSaysSo(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc) // no stream made for it
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = events.NewPublisher(js, prefix).Publish(ctx, events.Turn{ID: "e1", UserID: "alice", UserMessage: "hi", Timestamp: time.Now()})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || !strings.Contains(err.Error(), "no stream answered for "+prefix+".turns.alice: none captures it (is memoryd serve running with this publisher's prefix?") {
		t.Fatalf("publish with no stream: %v", err)
	}
}

// TestEnsureStreamMadeByHand: a turn stream an operator made beforehand is
// kept as configured, but one whose retention deletes turns once consumed
// is refused, saying so (the walk's replay failed with "consumer in pull
// mode requires ack policy" after ingest had emptied it), and one whose
// wider subject would take memoryd's requests names its subjects.
func TestEnsureStreamMadeByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		retention jetstream.RetentionPolicy
		wider     bool
		want      string
	}{
		{"work queue", jetstream.WorkQueuePolicy, false, "its retention is WorkQueue, but memoryd keeps every turn"},
		{"interest", jetstream.InterestPolicy, false, "its retention is Interest"},
		{"wider subject", jetstream.LimitsPolicy, true, ".>] (a stream of memoryd's holds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix, stream := eventstest.Names(t, nc)
			subject := events.TurnSubjects(prefix)
			if tt.wider {
				subject = prefix + ".>"
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Retention: tt.retention}); err != nil {
				t.Fatal(err)
			}
			_, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ensure the stream made by hand: %v; want %q", err, tt.want)
			}
		})
	}
	prefix, stream := eventstest.Names(t, nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{events.TurnSubjects(prefix)}, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatalf("a stream made by hand with limits retention: %v", err)
	}
}
