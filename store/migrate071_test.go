package store_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// corpus071 is text in every language memoryd names (docs/protocol.md,
// "Languages"), the scripts it bigrams, code and markup, Unicode forms
// the indexing normalizes, and edge cases: empty, blank, punctuation
// alone, long words, and (huge071) texts of 256 KiB, the most an answer
// holds.
var corpus071 = append(slices.Clone(indexingTexts),
	// Stemmed configurations.
	"ذهبت إلى السوق واشتريت الخبز والتمر", "Ես սիրում եմ գրքեր կարդալ", "Etxera joan nintzen atzo arratsaldean",
	"Ahir vam anar a la platja amb els nens", "Vi købte et nyt hus sidste år", "Wij fietsen elke dag naar het werk",
	"The children were running through the gardens, happily singing", "Kävimme saunassa ja uimme järvessä",
	"Nous sommes allés au marché acheter des légumes frais", "Die Häuser in München sind teuer, ich wohne in Straßburg",
	"Πήγαμε στην Αθήνα το καλοκαίρι για διακοπές", "मैं कल दिल्ली गया था और वहाँ खाना खाया",
	"Tegnap elmentünk a piacra gyümölcsöt venni", "Saya pergi ke pasar untuk membeli sayuran",
	"Chuaigh mé go dtí an siopa inné", "Siamo andati al mare con gli amici d'estate", "Vakar važiavome į kaimą pas senelius",
	"म भोलि काठमाडौं जाँदैछु", "Vi dro på hytta i helgen og gikk på ski", "Comprámos uma casa nova em Lisboa no ano passado",
	"Am fost la munte în vacanța de iarnă", "Мы ходили в театр на прошлой неделе", "Ишли смо у биоскоп прошле недеље",
	"Fuimos a la playa con los niños el sábado pasado", "Vi åkte till Göteborg förra sommaren",
	"நான் நேற்று சென்னைக்கு சென்றேன்", "Geçen hafta İstanbul'a gittik ve çok güzeldi", "איך האָב ליב צו לייענען ביכער",
	// simple.
	"Byliśmy w Krakowie w zeszłym tygodniu", "Včera jsme byli v kině", "Včera sme išli do obchodu",
	"Минулого тижня ми їздили до Львова", "Миналата седмица ходихме на море", "Jučer smo išli na more",
	"Včeraj smo šli v gore", "Eile käisime metsas seenel", "Vakar mēs gājām uz teātri",
	"אתמול הלכנו לים עם הילדים", "دیروز به بازار رفتیم و میوه خریدیم", "Hôm qua chúng tôi đi chợ mua rau",
	"Semalam kami pergi ke pasar malam", "ປະເທດລາວມີເຂົ້າໜຽວແຊບຫຼາຍ", "မန္တလေးမြို့ကိုသွားခဲ့တယ်",
	"今天的天气很好，我们去公园散步", "ラーメンを食べに行きました", "어제 친구랑 영화를 봤어요",
	// Code, markup, addresses.
	"func (s *Store) InsertContext(ctx context.Context, items []ContextWrite) ([]int64, error) {",
	"SELECT * FROM context WHERE user_id = $1; -- it's a `query`",
	"node.js, socket.io, ~/src/app/main.go, 3.14 and 10:30, v1.2.3-beta+build.5",
	"<div class=\"x\">Hello &amp; welcome</div> [link](https://example.com/a/b?c=d&e=f#g)",
	"getUserName() calls parseJSONResponse and utf8Decode; URLs, IDs and CDs stay whole; ÜberCool",
	"ＡＢＣ１２３ ｶﾀｶﾅ ㈱ ① ﬀ ½ ™ ℃",
	"e\u0301le\u0300ve Mu\u0308nchen n\u0303 \u1100\u1161\u11a8",
	"emoji 🐕 dog 👍🏽 🇵🇹 and zero\u200bwidth and \u202ertl",
	"don't it's O'Reilly's \\backslash\\ 'quoted' \"double\"",
	"a", "", " ", "\t\n", "...", "!!!???", "123 456.789", strings.Repeat("x", 3000),
	strings.Repeat("supercalifragilistic", 120),
)

// huge071 are the corpus's 256 KiB texts: prose with accents, CJK, code.
var huge071 = []string{
	cut071(strings.Repeat("Der Bär aß Crème brûlée im Café in São Paulo, naïve résumé. ", 5000)),
	cut071(strings.Repeat("東京の天気はどうですか今天的天气很好서울에서만나요", 4000)),
	cut071(strings.Repeat("if err := s.InsertContext(ctx, items); err != nil { return fmt.Errorf(\"maxAckPending: %w\", err) } ", 3000)),
}

// cut071 is s cut to at most 256 KiB, at a character's end.
func cut071(s string) string { return strings.ToValidUTF8(s[:256<<10], "") }

// outputs071 is what memoryd's indexing and query functions return for
// the corpus, as bytes (each value's binary form, or its rows), keyed by
// function, configuration and text; searchText is the expression of the
// search text of t (migration 071's memoryd_search_text) to compare.
func outputs071(t *testing.T, ctx context.Context, conn *pgx.Conn, searchText string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	texts := make([]*string, 0, len(corpus071)+1)
	for i := range corpus071 {
		texts = append(texts, &corpus071[i])
	}
	texts = append(texts, nil)
	var configs []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(cfgname::text ORDER BY cfgname) FROM pg_ts_config`).Scan(&configs); err != nil {
		t.Fatal(err)
	}
	configs = append(configs, "") // a NULL configuration
	read := func(name, sql string, args ...any) {
		t.Helper()
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var (
			key string
			v   []byte
		)
		if _, err := pgx.ForEachRow(rows, []any{&key, &v}, func() error {
			out[name+" "+key] = slices.Clone(v)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	perConfig := `SELECT coalesce(c, 'NULL') || ' ' || i, %s
		FROM unnest($1::text[]) WITH ORDINALITY AS x(t, i), unnest($2::text[]) AS y(c0), LATERAL (SELECT nullif(c0, '')) z(c)`
	for name, expr := range map[string]string{
		"memoryd_tsvector":       "tsvectorsend(memoryd_tsvector(c, t))",
		"memoryd_tsvector_base":  "tsvectorsend(memoryd_tsvector_base(c, t))",
		"memoryd_camel_tsvector": "tsvectorsend(memoryd_camel_tsvector(c, t))",
		"memoryd_query_terms":    "convert_to(array_to_string(memoryd_query_terms(c, t), '|', '<NULL>'), 'UTF8')",
	} {
		read(name, fmt.Sprintf(perConfig, expr), texts, configs)
		read(name+" huge", fmt.Sprintf(perConfig, expr), huge071, []string{"english"})
	}
	// A query's text is store.TSQuery's, of the text's words.
	queries := make([]string, 0, len(corpus071))
	for _, text := range corpus071 {
		queries = append(queries, store.TSQuery(strings.Fields(text)))
	}
	read("memoryd_tsquery", fmt.Sprintf(perConfig, "tsquerysend(memoryd_tsquery(c, t))"), queries, configs)
	perText := `SELECT i::text, %s FROM unnest($1::text[]) WITH ORDINALITY AS x(t, i)`
	for name, expr := range map[string]string{
		"search text":         searchText,
		"search text steps":   searchTextSteps071,
		"memoryd_nfkc":        "convert_to(memoryd_nfkc(t), 'UTF8')",
		"memoryd_fold":        "convert_to(memoryd_fold(t), 'UTF8')",
		"memoryd_fold_words":  "convert_to(memoryd_fold_words(t), 'UTF8')",
		"memoryd_split":       "convert_to(memoryd_split(t), 'UTF8')",
		"memoryd_camel":       "convert_to(memoryd_camel(t), 'UTF8')",
		"memoryd_camel_words": "convert_to(memoryd_camel_words(t), 'UTF8')",
		"memoryd_cjk":         "convert_to(memoryd_cjk(t), 'UTF8')",
		// The term rows of a text's vector as a question (A) and as an
		// answer (B), and of its vector stripped of positions.
		"memoryd_item_terms": `(SELECT convert_to(string_agg(r::text, ';' ORDER BY r::text), 'UTF8') FROM (
			SELECT memoryd_item_terms(setweight(memoryd_tsvector('english', t), 'A') || setweight(memoryd_tsvector('english', 'b ' || t), 'B')) AS r
			UNION ALL SELECT memoryd_item_terms(strip(memoryd_tsvector('english', t)))
			UNION ALL SELECT memoryd_item_terms(NULL)) r)`,
		"memoryd_chunk_terms": `(SELECT convert_to(string_agg(r::text, ';' ORDER BY r::text), 'UTF8') FROM (
			SELECT memoryd_chunk_terms(setweight(memoryd_tsvector('simple', t), 'A') || setweight(memoryd_tsvector('simple', 'b ' || t), 'B')) AS r
			UNION ALL SELECT memoryd_chunk_terms(NULL)) r)`,
	} {
		if name == "search text" && expr == searchTextSteps071 {
			continue // the steps' read, copied below
		}
		read(name, fmt.Sprintf(perText, expr), texts)
		if !strings.HasSuffix(name, "_terms") { // the huge items' term rows are compared as stored
			read(name+" huge", fmt.Sprintf(perText, expr), huge071)
		}
	}
	if searchText == searchTextSteps071 {
		// The same expression: its outputs are the steps' (read once,
		// the huge texts' about 2 s of Postgres's time).
		for k, v := range out {
			if rest, ok := strings.CutPrefix(k, "search text steps "); ok {
				out["search text "+rest] = v
			}
		}
	}
	return out
}

// searchTextSteps071 is the search text of t as the expression of its
// steps, which migration 071's memoryd_search_text replaces.
const searchTextSteps071 = "convert_to(memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(t)))), 'UTF8')"

// storedRows071 is what the tables hold that the indexing wrote: each
// item's vector, lengths and term rows, each chunk's vector, lengths and
// term rows, by the item's user and question (or the chunk's collection
// and index), with xmin: the row's version.
func storedRows071(t *testing.T, ctx context.Context, conn *pgx.Conn) (rows map[string][]byte, versions map[string]string) {
	t.Helper()
	rows, versions = map[string][]byte{}, map[string]string{}
	r, err := conn.Query(ctx, `
		SELECT 'item ' || c.user_id || ' ' || md5(c.question) || ' ' || md5(c.answer), c.xmin::text,
			tsvectorsend(c.search) || int4send(c.question_len) || int4send(c.answer_len) || convert_to(c.ts_config, 'UTF8')
			|| coalesce((SELECT convert_to(string_agg(t.lexeme || ':' || t.question || ':' || t.answer, ';' ORDER BY t.lexeme), 'UTF8')
				FROM context_terms t WHERE t.user_id = c.user_id AND t.item_id = c.id), '')
		FROM context c
		UNION ALL
		SELECT 'chunk ' || o.name || ' ' || ch.chunk_index, ch.xmin::text,
			tsvectorsend(ch.search) || int4send(ch.heading_len) || int4send(ch.text_len) || convert_to(ch.ts_config, 'UTF8')
			|| coalesce((SELECT convert_to(string_agg(t.lexeme || ':' || t.heading || ':' || t.body, ';' ORDER BY t.lexeme), 'UTF8')
				FROM chunk_terms t WHERE t.collection_id = ch.collection_id AND t.chunk_id = ch.id), '')
		FROM doc_chunks ch JOIN collections o ON o.id = ch.collection_id`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		key, xmin string
		v         []byte
	)
	if _, err := pgx.ForEachRow(r, []any{&key, &xmin, &v}, func() error {
		rows[key], versions[key] = slices.Clone(v), xmin
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows, versions
}

// seed071 stores the corpus as items of user (question: a text, answer:
// the next one) and as a document of user's collection named
// collection, under the text search configuration config ("" for the
// default, English).
func seed071(t *testing.T, ctx context.Context, s *store.Store, user, collection, config string) {
	t.Helper()
	if config != "" {
		if _, err := s.SetLanguage(ctx, user, config, config); err != nil {
			t.Fatal(err)
		}
	}
	all := append(slices.Clone(corpus071), huge071...)
	var items []store.ContextWrite
	for i, text := range all {
		if strings.TrimSpace(text) == "" {
			continue // an item's question is never blank
		}
		items = append(items, store.ContextWrite{UserID: user, Question: text, Answer: all[(i+1)%len(all)], CreatedAt: t0})
	}
	if _, err := s.InsertContext(ctx, items); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: user}, Collection: collection, Source: "corpus.md",
		Content: "# Corpus\n\n" + strings.Join(corpus071, "\n\n## Next\n\n") + "\n"})
	put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: user}, Collection: collection + "-code", Source: "huge.go",
		Content: huge071[2]})
}

// TestMigration071KeepsEveryOutput: migration 071 changes how Postgres
// runs the indexing and query functions (PL/pgSQL, inlined), not what
// they return: over the corpus, under every text search configuration,
// each function returns the same bytes after it as before (the PL/pgSQL
// memoryd_search_text the same as the expression it replaces); the items
// and chunks stored before it are not touched (the same row versions),
// hold what the new functions compute, are found by a search, and equal
// those of the same texts stored after it.
func TestMigration071KeepsEveryOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	quiet := slog.New(slog.DiscardHandler)
	// Every migration but 071: the later ones touch none of its functions,
	// and this release's store (the seed's puts) reads their columns.
	if _, err := s.Migrate(ctx, migrationsWithout(t, "071_"), quiet); err != nil {
		t.Fatal(err)
	}
	var done []func()
	release := func() {
		for _, f := range done {
			f()
		}
		done = nil
	}
	defer release()
	// One connection for each reading, given back after it.
	conn := func() *pgx.Conn {
		c, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, c.Release)
		return c.Conn()
	}
	// Before 071 the search text is its steps' expression.
	before := outputs071(t, ctx, conn(), searchTextSteps071)
	release()
	seed071(t, ctx, s, "ana", "ana-kb", "")
	seed071(t, ctx, s, "hans", "hans-kb", "german")
	rowsBefore, versionsBefore := storedRows071(t, ctx, conn())
	release()

	applied, err := s.Migrate(ctx, migrations.FS, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(applied, 71) {
		t.Fatalf("applied %v, not 071", applied)
	}
	after := outputs071(t, ctx, conn(), "convert_to(memoryd_search_text(t), 'UTF8')")
	release()
	if len(before) < 5000 {
		t.Fatalf("only %d outputs compared", len(before))
	}
	if len(after) != len(before) {
		t.Errorf("%d outputs after 071, %d before", len(after), len(before))
	}
	var diff []string
	for k, v := range before {
		if w, ok := after[k]; !ok || !bytes.Equal(v, w) {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	if len(diff) > 0 {
		t.Errorf("%d outputs differ after 071, e.g. %q", len(diff), diff[:min(len(diff), 10)])
	}

	// The rows stored before: untouched, and what the new functions give.
	rowsMigrated, versionsMigrated := storedRows071(t, ctx, conn())
	release()
	if len(rowsBefore) < 2*len(corpus071) {
		t.Fatalf("only %d rows stored before 071", len(rowsBefore))
	}
	var changed []string
	for k, v := range rowsBefore {
		if !bytes.Equal(rowsMigrated[k], v) || versionsMigrated[k] != versionsBefore[k] {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		t.Errorf("071 changed %d stored rows, e.g. %q", len(changed), changed[:min(len(changed), 10)])
	}
	if cols, terms := derivedDiffer(t, ctx, s); cols != 0 || terms != 0 {
		t.Errorf("after 071, %d items' vectors differ from memoryd_tsvector's, %d term rows", cols, terms)
	}
	var stale int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM doc_chunks WHERE
		search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B')
		OR heading_len <> length(memoryd_tsvector_base(ts_config, heading)) OR text_len <> length(memoryd_tsvector_base(ts_config, text))`).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Errorf("after 071, %d chunks' vectors differ from memoryd_tsvector's", stale)
	}
	// An item is found by its question's words and by its answer's (the
	// text after its question).
	found := func(text string) []string {
		i := slices.Index(corpus071, text)
		out := []string{corpus071[i-1], corpus071[i]}
		slices.Sort(out)
		return out
	}
	checkSearches(t, ctx, s, "ana", []searchCase{{"pokemon", found(indexingTexts[1])}, {"server", found(indexingTexts[3])}})
	checkSearches(t, ctx, s, "hans", []searchCase{{"haus", found("Die Häuser in München sind teuer, ich wohne in Straßburg")}})

	// The same texts stored after 071: the same rows.
	seed071(t, ctx, s, "bea", "bea-kb", "")
	seed071(t, ctx, s, "otto", "otto-kb", "german")
	rowsAfter, _ := storedRows071(t, ctx, conn())
	release()
	compared, differ := 0, []string(nil)
	for k, v := range rowsBefore {
		for old, now := range map[string]string{"ana": "bea", "hans": "otto"} {
			for _, kind := range []string{"item ", "chunk "} {
				if rest, ok := strings.CutPrefix(k, kind+old); ok {
					compared++
					if w, ok := rowsAfter[kind+now+rest]; !ok || !bytes.Equal(v, w) {
						differ = append(differ, k)
					}
				}
			}
		}
	}
	if len(differ) > 0 {
		t.Errorf("%d rows stored after 071 differ from those of the same texts stored before, e.g. %q", len(differ), differ[:min(len(differ), 10)])
	}
	if compared != len(rowsBefore) {
		t.Errorf("compared %d of the %d rows stored before 071", compared, len(rowsBefore))
	}
}

// migrationsWithout is migrations.FS without the files whose names start
// with prefix.
func migrationsWithout(t *testing.T, prefix string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			continue
		}
		data, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		m[n] = &fstest.MapFile{Data: data}
	}
	return m
}
