package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/memoryd/memoryd/events"
)

// runExport is `memoryd export`: a user's memory as JSON lines, over
// memory.export (issue 16 item 7).
func runExport(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o   clientOptions
		out string
	)
	defer func() { err = o.callError(err) }()
	f := newFlags("export", `Usage: memoryd export --user U [-o FILE]

Writes the user's memory (facts, their history, clears and context items,
with scopes) as JSON lines, to stdout or FILE: the same memory always gives
the same bytes, and 'memoryd import' reads it back. Turns and token usage
are not exported (the turn stream is their source). The export is the
memory as it was at its first page, however the user chats meanwhile.
--timeout bounds each page's request, not the whole export, which takes
as many pages as the memory needs; the first reads and copies the whole
memory (seconds for tens of MB). FILE is written only when the export is
complete. An export refused part-way (its copy gone) starts again, up to
3 times.`)
	// Past memoryd's own bound, which starts once a slot is free: its
	// error, not the client's timeout, says what happened.
	o.registerTimeout(f, events.DefaultExportWait)
	o.perRequest = true
	f.ArgString(&out, "o", "", "write to this file instead of stdout (\"-\": stdout, as import reads \"-\" from stdin)")
	pos, err := o.parse(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return f.usageErr("export takes no arguments, got %q (use -o FILE)", pos)
	}
	c, reqCtx, done, err := o.client(ctx, a)
	if err != nil {
		return err
	}
	defer done()
	data, err := exportConsistent(func(w io.Writer) error { return c.Export(reqCtx, o.user, w) })
	var changed *exportChangedError
	if errors.As(err, &changed) {
		// Its own words: callError would reduce it to the last page's 409,
		// hiding that the export started again each time.
		return errors.New(changed.Error())
	}
	if err != nil {
		return err
	}
	buf := bytes.NewBuffer(data)
	n := bytes.Count(buf.Bytes(), []byte("\n"))
	if n == 1 {
		// Not an error (a user may have nothing yet), but said: a user id
		// misspelt gave a header alone and exit 0 (a newcomer walk).
		fmt.Fprintf(a.stderr, "memoryd export: %s has nothing stored: the export holds its header alone (a user id is matched exactly)\n", o.user)
	}
	if out == "" || out == "-" {
		_, err := a.stdout.Write(buf.Bytes())
		return err
	}
	if err := writeFileAtomic(out, buf.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "memoryd export: %d line(s) written to %s: a header and %d of %s's memory\n", n, out, n-1, o.user)
	return nil
}

// exportAttempts bounds how often export starts again after a page was
// refused (409): its copy was gone (unread for an hour, replaced by newer
// exports of the user, or the user was forgotten), or the pages came from
// replicas of two releases during a rolling upgrade.
const exportAttempts = 3

// exportConsistent runs export, starting again from the first page when the
// service refuses a later page (409), at most exportAttempts times, and
// returns one whole export.
func exportConsistent(export func(io.Writer) error) ([]byte, error) {
	var buf bytes.Buffer
	for attempt := 1; ; attempt++ {
		buf.Reset()
		err := export(&buf)
		var se *events.ServiceError
		if !errors.As(err, &se) || se.Code != 409 {
			return buf.Bytes(), err
		}
		if attempt == exportAttempts {
			return nil, &exportChangedError{err: se}
		}
	}
}

// exportChangedError is an export given up after exportAttempts, a page
// of each refused (the last page's 409 wrapped).
type exportChangedError struct{ err *events.ServiceError }

func (e *exportChangedError) Error() string {
	return fmt.Sprintf("each of %d exports was refused part-way (the service answered %d the last time: %s)",
		exportAttempts, e.err.Code, e.err.Description)
}

func (e *exportChangedError) Unwrap() error { return e.err }

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so that path never holds half an export.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write %s: the directory %s does not exist", path, filepath.Dir(path))
	case errors.As(err, &pe):
		// Name path, not the temporary file beside it.
		return fmt.Errorf("write %s: %w", path, pe.Err)
	case err != nil:
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
