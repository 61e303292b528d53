package main

import (
	"context"
	"fmt"

	"github.com/memoryd/memoryd/events"
)

// runLanguage reads or sets a user's language (memory.language).
func runLanguage(ctx context.Context, a *cli, args []string) (err error) {
	var o clientOptions
	defer func() { err = o.callError(err) }()
	f := newFlags("language", "Usage: memoryd language --user U [LANGUAGE]\n\n"+
		"Shows a user's language, or sets it to LANGUAGE (an ISO 639-1 code or English name, e.g. de or german;\n"+
		"docs/protocol.md lists them) and re-indexes their context items. It chooses how their memory is searched.")
	// A change re-indexes every item of the user (seconds for thousands).
	o.registerTimeout(f, events.DefaultLanguageTimeout)
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return f.usageErr("language takes at most one argument, got %q", pos)
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	lang := ""
	if len(pos) == 1 {
		lang = pos[0]
		o.changes = "memoryd language shows the language set; setting it again is safe"
	}
	reply, err := c.SetLanguage(reqCtx, o.user, lang)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(a.stdout, reply)
	}
	fmt.Fprintf(a.stdout, "%s (text search configuration %s)\n", reply.Language, reply.Config)
	if lang != "" {
		fmt.Fprintf(a.stderr, "%d context item(s) re-indexed\n", reply.Reindexed)
	}
	return nil
}
