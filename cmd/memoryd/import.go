package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
)

// importWait is import's default --timeout: memoryd's default write
// budget (enricher.Config.WriteTimeout, 5 s) and 5 s more, so that its own
// answer, done or failed, comes first.
const importWait = 10 * time.Second

// runImport is `memoryd import`: an export merged into a user's memory,
// over memory.import.
func runImport(ctx context.Context, a *cli, args []string) (err error) {
	var o clientOptions
	defer func() { err = o.callError(err) }()
	f := newFlags("import", `Usage: memoryd import --user U [FILE|-]

Merges an export (memoryd export) read from FILE, or stdin when FILE is "-"
or absent, into the user's memory: a fact is kept when it is the latest
stated, clears are kept, context items and history entries already held are
not duplicated, so importing twice imports once. The lines go in requests
of at most 768 KiB, each atomic; a bad line is reported with its line
number and nothing of its request is written. A FILE is first read through
and refused, with nothing written, when a line is one memoryd refuses (not
JSON, as in a file cut short mid-line, a field given twice or unknown);
stdin is sent as it is read. A FILE is read once: the bytes checked are
those sent, from a private copy in the temporary directory ($TMPDIR, as
large as the file) removed when the command ends. A file cut at a line's end
cannot be told from a whole one: check its line count against what export
printed. --timeout bounds each request, not the whole import, which takes
as many as the file needs.`)
	// A part's work may take memoryd's whole write budget (5 s by
	// default) under load: waiting as long, the command gave up as the
	// reply came, not knowing whether the part was written.
	o.registerTimeout(f, importWait)
	o.perRequest = true
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return f.usageErr("import takes one FILE (or - for stdin), got %q", pos)
	}
	in := a.in()
	if len(pos) == 1 && pos[0] != "-" {
		file, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer file.Close()
		in = file
		// Check a whole regular file before the first request: one cut short
		// mid-line (an interrupted copy) is refused with nothing written,
		// where the requests before the cut would have been committed. A
		// pipe or stdin is read once, as it comes.
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			checked, remove, err := checkedCopy(file)
			if err != nil {
				return err
			}
			defer remove()
			in = checked
		}
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	o.changes = "importing the file again imports each row once"
	reply, err := c.Import(reqCtx, o.user, in)
	if errors.Is(err, events.ErrForgottenDuringImport) {
		return fmt.Errorf("%s was forgotten during the import: what its earlier requests wrote went with the forget, and the rest was not imported; import the file again to restore it into the new memory", o.user)
	}
	if err != nil {
		if n := importedRows(reply); n > 0 {
			// The requests before the failure are committed: say so, not
			// only that the last one failed.
			fmt.Fprintf(a.stderr, "memoryd import: the requests before the failure were imported into %s (rows written or changed): %s; "+
				"importing the file again imports them once (a longer --timeout if it timed out)\n", o.user, importCounts(reply))
		}
		var (
			svcErr *events.ServiceError
			inErr  *events.InputError
		)
		switch {
		case reply.MemoryID == "":
			// Nothing written: a refused line is bad input (exit 2).
		case errors.As(err, &svcErr) && svcErr.Code == 400:
			// A line refused after earlier requests were written: the
			// import failed part-way (exit 1), where exit 2 says that
			// nothing was done.
			return fmt.Errorf("the service refused the request (400): %s", svcErr.Description)
		case errors.As(err, &inErr):
			// Likewise a line the command refuses itself (stdin is checked
			// as it is sent: one cut mid-line, one over a request or the
			// NATS server's max_payload).
			return errors.New(strings.TrimPrefix(inErr.Error(), "memoryd import: "))
		}
		return err
	}
	if o.json {
		return printJSON(a.stdout, reply)
	}
	fmt.Fprintf(a.stdout, "imported into %s (rows written or changed): %s\n", o.user, importCounts(reply))
	return nil
}

// checkedCopy reads file once, checking every line as memoryd would (its
// format and memoryd's own checks of each line: a field given twice, an
// unknown one), and returns a private temporary copy of the bytes checked,
// to send, and the function that removes it. Read twice, a file changed
// between the check and the send (an export still being written, a copy
// under way) was sent unchecked in part. Memory holds a line at a time;
// the copy takes the file's size on disk in the temporary directory
// ($TMPDIR), unlinked at once where the system allows, so that nothing
// is left behind by a killed command.
func checkedCopy(file io.Reader) (io.Reader, func(), error) {
	spool, err := os.CreateTemp("", "memoryd-import-*.jsonl")
	if err != nil {
		return nil, nil, fmt.Errorf("a private copy of the file to check and send: %w", err)
	}
	name := spool.Name()
	unlinked := os.Remove(name) == nil // Unix: the open copy stays readable
	remove := func() {
		spool.Close()
		if !unlinked {
			os.Remove(name)
		}
	}
	w := bufio.NewWriter(spool)
	err = events.CheckImportWith(bufio.NewReader(io.TeeReader(file, w)), func(n int, line []byte) error {
		if err := enricher.CheckImportLine(n, line); err != nil {
			return &events.InputError{Line: n, Problem: err.Error()}
		}
		return nil
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = spool.Seek(0, io.SeekStart)
	}
	if err != nil {
		remove()
		// Said, as the service's refusal of a line says it.
		var inErr *events.InputError
		if errors.As(err, &inErr) {
			return nil, nil, &events.InputError{Line: inErr.Line, Problem: inErr.Problem + ": the file is refused whole, nothing was imported"}
		}
		return nil, nil, fmt.Errorf("a private copy of the file to check and send: %w", err)
	}
	return spool, remove, nil
}

// importCounts names every line type the service counted: a type added to
// the format is printed without a change here.
func importCounts(reply events.ImportReply) string {
	parts := make([]string, 0, len(reply.Imported))
	for _, typ := range slices.Sorted(maps.Keys(reply.Imported)) {
		parts = append(parts, fmt.Sprintf("%s %d", typ, reply.Imported[typ]))
	}
	return strings.Join(parts, ", ")
}

func importedRows(reply events.ImportReply) int64 {
	var n int64
	for _, v := range reply.Imported {
		n += v
	}
	return n
}
