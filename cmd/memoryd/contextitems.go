package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/memoryd/memoryd/events"
)

// The `memoryd memory list|get|update|delete` actions (issue 16 item 7):
// context items by id, over memory.context.*. runMemory parses the flags and
// hands these actions here.

// itemFlags are the flags only these actions use.
type itemFlags struct {
	limit  int
	after  string
	answer string
}

func (it *itemFlags) register(f *flags) {
	f.ArgInt(&it.limit, "limit", events.DefaultContextPage, fmt.Sprintf("list: items per page (1..%d)", events.MaxContextPage))
	f.ArgString(&it.after, "after", "", "list: continue after this position (CREATED_AT,ID, as printed by the previous page)")
	f.ArgString(&it.answer, "answer", "", "update: the new answer")
}

// isItemAction reports whether action is one of these.
func isItemAction(action string) bool {
	switch action {
	case "list", "get", "update", "delete":
		return true
	}
	return false
}

// checkItemAction refuses what these actions cannot take, before connecting.
func checkItemAction(f *flags, action string, pos []string, id int) error {
	if len(pos) != 0 {
		return f.usageErr("memory %s takes flags, not arguments (got %q)", action, pos)
	}
	if action != "list" && id <= 0 {
		return f.usageErr("memory %s needs --id N (a context item id)", action)
	}
	return nil
}

// runItemAction runs one action. set reports whether a flag was given on the
// command line, so that update can tell "--answer ”" from no --answer.
func runItemAction(ctx context.Context, a *cli, c *events.Client, o *clientOptions, it *itemFlags, action string, id int64, question string, all bool, set func(string) bool) error {
	switch action {
	case "list":
		return listItems(ctx, a, c, o, it, all)
	case "get":
		item, err := c.GetContext(ctx, o.user, id)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, item)
		}
		printItem(a, item)
	case "update":
		req := events.ContextUpdateRequest{UserID: o.user, ID: id}
		if set("question") {
			req.Question = &question
		}
		if set("answer") {
			req.Answer = &it.answer
		}
		o.changes = "memoryd memory get shows whether it was updated; updating it again is safe"
		item, err := c.UpdateContext(ctx, req)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(a.stdout, item)
		}
		fmt.Fprintf(a.stdout, "updated id %d\n", item.ID)
	case "delete":
		o.changes = "memoryd memory get shows whether it is gone; deleting it again is safe"
		if err := c.DeleteContext(ctx, o.user, id); err != nil {
			return err
		}
		return printDeleted(a, o.json, 1)
	}
	return nil
}

// listItems prints one page, or with all every page, newest first. Without
// all, a page that is not the last ends with the --after that continues.
func listItems(ctx context.Context, a *cli, c *events.Client, o *clientOptions, it *itemFlags, all bool) error {
	req := events.ContextListRequest{UserID: o.user, Limit: &it.limit}
	if it.after != "" {
		at, idText, ok := strings.Cut(it.after, ",")
		t, err1 := time.Parse(time.RFC3339Nano, at)
		n, err2 := strconv.ParseInt(idText, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("--after %q is not CREATED_AT,ID (e.g. 2026-11-21T10:00:00Z,17)", it.after)
		}
		req.After = &events.ContextCursor{CreatedAt: t, ID: n}
	}
	out := events.ContextListReply{Items: []events.ContextItem{}}
	for {
		reply, err := c.ListContext(ctx, req)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, reply.Items...)
		out.Next = reply.Next
		if !all || reply.Next == nil {
			break
		}
		req.After = reply.Next
	}
	if o.json {
		return printJSON(a.stdout, out)
	}
	for _, item := range out.Items {
		printItem(a, item)
	}
	fmt.Fprintf(a.stderr, "%d item(s)\n", len(out.Items))
	if out.Next != nil {
		fmt.Fprintf(a.stderr, "more: add --after %s,%d (or --all for every page)\n", out.Next.CreatedAt.UTC().Format(time.RFC3339Nano), out.Next.ID)
	}
	return nil
}

func printItem(a *cli, it events.ContextItem) {
	fmt.Fprintf(a.stdout, "id=%d  %s\n  Q: %s\n  A: %s\n", it.ID, shownTime(it.CreatedAt), it.Question, it.Answer)
}
