package events_test

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// callModel stands for the frontend's chat model call: system is the memory
// to put before the conversation ("" for none).
func callModel(ctx context.Context, system, message string) (string, error) {
	return "Try the lentil curry you liked last week.", nil
}

// A Go frontend's whole set-up: connect as its NATS user with its own
// inbox prefix (FrontendInbox, which includes TrackViolations), then for
// each turn enrich before the model call with a short deadline, answer
// without memory if memory is not there, and publish the turn once
// answered. The frontend's credential is the one docs/protocol.md
// describes ("Reply subjects"): alice's subjects and its own inbox.
func Example() {
	nc, err := nats.Connect("nats://127.0.0.1:4222",
		nats.UserInfo("alice_frontend", os.Getenv("NATS_PASSWORD")),
		// Your error handler, if any, goes before FrontendInbox: it still
		// gets every error, permissions violations included.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Printf("nats: %v", err)
		}),
		events.FrontendInbox("alice_frontend"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	publisher := events.NewPublisher(js, "") // "memory", memoryd's default prefix
	client := events.NewClient(nc, "")

	userID, message := "alice", "What should I cook tonight?"

	// Before the model call: memory, within what the chat can wait.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	// FormatSystem: the injection is a system message; the default,
	// FormatInline, is text to append to the user's message instead.
	mem, err := client.Enrich(ctx, events.EnrichRequest{UserID: userID, Message: message, Format: events.FormatSystem})
	cancel()
	var system string
	switch {
	case err != nil:
		// No memoryd (nats.ErrNoResponders), too slow
		// (context.DeadlineExceeded), or not allowed
		// (events.ErrRequestRefused): answer without memory.
		log.Printf("answering without memory: %v", err)
	case mem.Degraded:
		log.Printf("answering without memory: %s", mem.Reason)
	default:
		system = mem.Injection
	}

	answer, err := callModel(context.Background(), system, message)
	if err != nil {
		log.Fatal(err)
	}

	// After the reply: the turn, which memoryd learns from.
	turn := events.Turn{
		ID:                "turn-0001", // unique per user; the same on a retry
		UserID:            userID,
		ConversationID:    "c-42",
		UserMessage:       message,
		AssistantResponse: answer,
		Timestamp:         time.Now(),
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := publisher.Publish(ctx, turn); err != nil {
		switch {
		case errors.Is(err, events.ErrInvalid), errors.Is(err, events.ErrRequestRefused):
			log.Printf("turn dropped: %v", err) // final: sending it again fails again
		default:
			log.Printf("turn not acknowledged, publish it again with the same id: %v", err)
		}
	}
}

// Telling a Client's errors apart: memoryd's own error replies are
// *events.ServiceError; the others are transport errors (see Client).
func ExampleClient_Forget() {
	nc, err := nats.Connect("nats://127.0.0.1:4222",
		nats.UserInfo("accounts_service", os.Getenv("NATS_PASSWORD")),
		events.FrontendInbox("accounts_service"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	client := events.NewClient(nc, "")

	// No deadline: Forget waits up to events.DefaultForgetTimeout.
	reply, err := client.Forget(context.Background(), "alice")
	var serviceErr *events.ServiceError
	switch {
	case err == nil:
		log.Printf("forgot alice: %+v", reply)
	case errors.As(err, &serviceErr):
		log.Printf("memoryd refused it (%d): %s", serviceErr.Code, serviceErr.Description)
	case errors.Is(err, events.ErrRequestRefused):
		// Returned as soon as the NATS server reports it (FrontendInbox
		// includes TrackViolations): this credential may not forget.
		log.Printf("not allowed: %v", err)
	case errors.Is(err, nats.ErrNoResponders):
		log.Printf("memoryd is not running (or not on this prefix): %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		log.Printf("memoryd did not answer in time: %v", err)
	default:
		log.Printf("forget: %v", err)
	}
}

// A "download my data" that hands the user a whole export or none: Export
// has written the pages before an error to its writer, a prefix that reads
// as a whole export, so it writes to a buffer, kept only on success, and
// starts again when a later page is refused (409: its copy is gone).
func ExampleClient_Export() {
	nc, err := nats.Connect("nats://127.0.0.1:4222",
		nats.UserInfo("accounts_service", os.Getenv("NATS_PASSWORD")),
		events.FrontendInbox("accounts_service"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	client := events.NewClient(nc, "")

	var export bytes.Buffer
	for attempt := 1; ; attempt++ {
		export.Reset() // what a failed attempt wrote is no export
		err = client.Export(context.Background(), "alice", &export)
		var serviceErr *events.ServiceError
		if err == nil || !errors.As(err, &serviceErr) || serviceErr.Code != 409 || attempt == 3 {
			break
		}
	}
	if err != nil {
		log.Printf("no export: %v", err)
		return
	}
	if err := os.WriteFile("alice.jsonl", export.Bytes(), 0o600); err != nil {
		log.Print(err)
	}
}
