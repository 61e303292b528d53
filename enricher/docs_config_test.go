package enricher_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// configFiles are configuration files as users keep them (a Dockerfile
// per environment, dotenv, INI, a systemd unit, Java properties, a
// conf file, a script named without an extension), each with "#"
// comments a Markdown reader takes for headings, by the fence
// language their chunks should name and the headings they may have (an
// INI section's name, never a comment).
var configFiles = map[string]struct {
	lang, content string
	headings      []string
}{
	"Dockerfile.prod": {"dockerfile", "# Build stage\nFROM golang:1.26 AS build\nRUN go build -o /out/app ./cmd/app\n\n# Runtime stage\nFROM gcr.io/distroless/static\nCOPY --from=build /out/app /app\n", nil},
	".env":            {"dotenv", "# Database settings\nDATABASE_URL=postgres://localhost/app\n\n# Sessions\nSESSION_SECRET=walrus\n", nil},
	".env.production": {"dotenv", "# Feature flags\nENABLE_WALRUS=true\n", nil},
	"my.ini":          {"ini", "[mysqld]\n# The port\nport = 3306\n\n[client]\n# The socket\nsocket = /var/run/mysqld.sock\n", []string{"mysqld", "client"}},
	"setup.cfg":       {"ini", "[flake8]\n# Long lines\nmax-line-length = 100\n", []string{"flake8"}},
	"app.service":     {"ini", "[Unit]\nDescription=Walrus daemon\n\n# Restart it\n[Service]\nExecStart=/usr/bin/walrus\nRestart=always\n", []string{"Unit", "Service"}},
	"app.properties":  {"properties", "# Server\nserver.port=8080\n# Walrus\nwalrus.name=tusk\n", nil},
	"logrotate.conf":  {"conf", "# rotate log files weekly\nweekly\n\n# keep 4 weeks worth of backlogs\nrotate 4\n", nil},
	"deploy":          {"bash", "#!/usr/bin/env bash\n# Deploy the walrus.\nset -euo pipefail\n\n# Build\nmake build\n", nil},
	"Jenkinsfile":     {"groovy", "// Pipeline\npipeline {\n  agent any\n}\n", nil},
}

// TestConfigFilesAreChunkedAsCode: configuration files put into a
// knowledge base are chunked as code, each chunk fenced with the file's
// language, headed by an INI section's name at most: their "# comments"
// are not headings. Before, Dockerfile.prod, .env, .ini, .cfg, .conf,
// .properties, systemd units and scripts without an extension were read
// as Markdown, each comment the heading of the lines under it.
func TestConfigFilesAreChunkedAsCode(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	for source, f := range configFiles {
		if _, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "config", Source: source, Content: f.content}); err != nil {
			t.Fatalf("put %s: %v", source, err)
		}
	}
	fifty := 50
	r, err := h.client.SearchDocuments(ctxT(t), events.DocsSearchRequest{UserID: "alice", Query: "walrus port rotate build flags pipeline line", MaxResults: &fifty})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range r.Chunks {
		seen[c.Source] = true
		f := configFiles[c.Source]
		if len(c.HeadingPath) > 1 || len(c.HeadingPath) == 1 && !slices.Contains(f.headings, c.HeadingPath[0]) ||
			!strings.HasPrefix(c.Text, "```"+f.lang+"\n") || !strings.HasSuffix(c.Text, "\n```") {
			t.Errorf("%s: chunk %d has headings %q and text %q, want %s code headed by one of %q at most", c.Source, c.ChunkIndex, c.HeadingPath, c.Text, f.lang, f.headings)
		}
	}
	for source := range configFiles {
		if !seen[source] {
			t.Errorf("%s: no chunk found", source)
		}
	}
}

// TestDocsPutOfHeadingsOnlySaysWhatToDo: the 400 of a document with no
// text outside its headings says what to do: add text under them, or,
// when its "#" lines are comments, name it by its language; and that
// advice works: the same content put under a name with an extension of
// code is taken. Before, the 400 said why only ("nothing to search").
func TestDocsPutOfHeadingsOnlySaysWhatToDo(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	content := "# Restart the walrus daemon nightly\n# systemctl restart walrus\n"
	_, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "c", Source: "walrus-notes", Content: content})
	if svcCode(err) != 400 || !strings.Contains(err.Error(), "add text under its headings") || !strings.Contains(err.Error(), "an extension such as .conf, .ini, .sh") {
		t.Fatalf("put of headings only: %v; want a 400 saying to add text under its headings or to name it by its language's extension", err)
	}
	r, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "c", Source: "walrus-notes.sh", Content: content})
	if err != nil || r.Chunks != 1 {
		t.Fatalf("put as walrus-notes.sh: %+v, %v; want it taken as code", r, err)
	}
}

// TestRePutRechunksAnOlderChunking: a document whose chunks an older
// memoryd cut (here a code document cut as Markdown, as before code
// documents were chunked as code: no chunking recorded) is cut again by
// a put of its same content, and a put after that is unchanged. Before,
// the re-put wrote nothing ("unchanged": its content's hash was the
// stored one) and the document kept its prose chunks, a "# comment"
// their heading, until its content changed.
func TestRePutRechunksAnOlderChunking(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	// As the release before put it: as Markdown, whatever its name.
	asMarkdown := func(c store.Collection, source, content string) ([]store.ChunkText, error) {
		return enricher.ChunkDocument(c, "app.md", content)
	}
	if _, err := st.PutDocument(ctxT(t), store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "code", Source: "app.py", Content: appModule, Chunk: asMarkdown}); err != nil {
		t.Fatal(err)
	}
	fifty := 50
	chunks := func() []events.DocChunk {
		r, err := h.client.SearchDocuments(ctxT(t), events.DocsSearchRequest{UserID: "alice", Query: "port app listens settings", MaxResults: &fifty})
		if err != nil {
			t.Fatal(err)
		}
		return r.Chunks
	}
	if cs := chunks(); len(cs) == 0 || len(cs[0].HeadingPath) == 0 {
		t.Fatalf("the older put's chunks: %+v, want Markdown's, headed by a comment", cs)
	}
	r, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "code", Source: "app.py", Content: appModule})
	if err != nil || r.Unchanged || r.Chunks == 0 {
		t.Fatalf("put again of the same content: %+v, %v; want it cut again", r, err)
	}
	for _, c := range chunks() {
		if !slices.Equal(c.HeadingPath, []string{"Config"}) || !strings.HasPrefix(c.Text, "```python\n") {
			t.Errorf("after the put again, chunk %d: headings %q, text %q; want Python code headed by its class", c.ChunkIndex, c.HeadingPath, c.Text)
		}
	}
	if r, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "code", Source: "app.py", Content: appModule}); err != nil || !r.Unchanged {
		t.Errorf("a third put of the same content: %+v, %v; want unchanged", r, err)
	}
}
