// Command memeval measures how well memoryd's enrich finds what a question
// needs, on public conversational-memory benchmarks (LoCoMo and
// LongMemEval), next to two keyword baselines computed on the very same units
// and questions: SQLite FTS5 BM25 and a set-overlap cosine.
//
// It runs memoryd in this process on a fresh Postgres schema and NATS subject
// prefix (both removed at the end), publishes every conversation as turn
// events through JetStream as a frontend would, waits until they are
// processed, then asks memory.enrich each question with threshold 0 and
// max_results 10. A question is a hit at k when one of its evidence turns is
// in one of the top k items.
//
// It then measures what enrich injects: the reply's tokens and facts for
// "facts": "relevant" and "all", with the evaluation's request and with
// memoryd's defaults, first with the facts extraction stored, then again after
// setting a plausible 40-fact profile per user through memory.facts.set
// (-fact-load); and, for LongMemEval's knowledge-update questions, whether
// the expected latest value is a current fact, whether the superseded one
// still is, and which of the two statements enrich injects. See
// docs/quality.md.
//
//	go -C tools run ./memeval                      # both dev sets, offline extractor
//	go -C tools run ./memeval -datasets locomo     # one set
//	go -C tools run ./memeval -cv                  # cross-validate the ranking's constants (cv.go)
//	MEMEVAL_LLM_BASE_URL=... MEMEVAL_LLM_MODEL=... go -C tools run ./memeval   # with a model
//	go -C tools run ./memeval -embed-base-url http://127.0.0.1:11434/v1 -embed-model nomic-embed-text   # lexical, vector, hybrid
//	go -C tools run ./memeval -embed-base-url https://api.openai.com/v1 -embed-model text-embedding-3-small -embed-dimensions 512   # shortened vectors
//	go -C tools run ./memeval -embed-local use-lite   # the same with a weak model that runs here (tools/localembed)
//	go -C tools run ./memeval -cv -cv-variant hybrid -embed-local use-lite   # cross-validate the vector side's constants (cvhybrid.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/tools/localembed"
)

type options struct {
	dataDir        string
	datasets       string
	databaseURL    string
	natsURL        string
	wait           time.Duration
	limit          int
	llmBaseURL     string
	llmAPIKey      string
	llmModel       string
	llmConcurrency int
	factLoad       int
	embedBaseURL   string
	embedModel     string
	embedDims      int
	embedStored    string // embedModel as memoryd stores it (with ?dimensions=N)
	embedAPIKey    string
	embedLocal     string
	cv             bool
	docs           bool
	cvCache        string
	cvDrop         string
	cvVariant      string
	verbose        bool
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memeval:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("memeval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dataDir, "data", env("MEMEVAL_DATA", "/work/shared/data"), "directory holding locomo-dev.json.gz and longmemeval-s-dev.json.gz (MEMEVAL_DATA)")
	fs.StringVar(&o.datasets, "datasets", "locomo,longmemeval", "comma-separated datasets to run: locomo, longmemeval")
	fs.StringVar(&o.databaseURL, "database-url", env("MEMEVAL_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres database; a fresh schema eval_<run> is created in it and dropped at the end; memoryd takes 30 connections unless the URL sets pool_max_conns (MEMEVAL_DATABASE_URL)")
	fs.StringVar(&o.natsURL, "nats-url", env("MEMEVAL_NATS_URL", "nats://127.0.0.1:4222"), "NATS server with JetStream; subject prefix eval<run> and stream EVAL<RUN>_TURNS are used and deleted (MEMEVAL_NATS_URL)")
	fs.DurationVar(&o.wait, "wait", 20*time.Minute, "how long to wait for memoryd to process the published turns")
	fs.IntVar(&o.limit, "limit", 0, "use only the first N conversations/questions of each dataset (0: all)")
	fs.StringVar(&o.llmBaseURL, "llm-base-url", env("MEMEVAL_LLM_BASE_URL", ""), "OpenAI-compatible endpoint to extract with instead of the offline rules (MEMEVAL_LLM_BASE_URL)")
	fs.StringVar(&o.llmAPIKey, "llm-api-key", env("MEMEVAL_LLM_API_KEY", ""), "API key for the LLM endpoint (MEMEVAL_LLM_API_KEY)")
	fs.StringVar(&o.llmModel, "llm-model", env("MEMEVAL_LLM_MODEL", ""), "model name, with -llm-base-url (MEMEVAL_LLM_MODEL)")
	fs.IntVar(&o.llmConcurrency, "llm-concurrency", 8, "LLM requests in flight")
	fs.IntVar(&o.factLoad, "fact-load", len(factLoadKeys), fmt.Sprintf("facts set per user through memory.facts.set (a plausible profile, at most %d) before the token measurement is repeated; 0 skips the repeat", len(factLoadKeys)))
	fs.BoolVar(&o.cv, "cv", false, "instead of the usual report, cross-validate the ranking's constants leave one fold out (5 folds: a LoCoMo conversation and a fifth of the LongMemEval questions each) next to FTS5-BM25 on the same folds; with -embed-local or -embed-base-url, the hybrid's vector constants too, against lexical enrich")
	fs.StringVar(&o.embedBaseURL, "embed-base-url", env("MEMEVAL_EMBED_BASE_URL", ""), "OpenAI-compatible embeddings endpoint: memoryd runs hybrid, and the report adds memoryd lexical and vector only (MEMEVAL_EMBED_BASE_URL)")
	fs.StringVar(&o.embedModel, "embed-model", env("MEMEVAL_EMBED_MODEL", embedding.DefaultModel), "embedding model, with -embed-base-url (MEMEVAL_EMBED_MODEL)")
	fs.IntVar(&o.embedDims, "embed-dimensions", 0, "with -embed-base-url: the vectors' dimensions asked of a model that can shorten them (text-embedding-3-*), as memoryd's --embed-dimensions; stored as model?dimensions=N (default: the model's own)")
	o.embedAPIKey = os.Getenv("MEMEVAL_EMBED_API_KEY")
	fs.StringVar(&o.embedLocal, "embed-local", "", "embed with a real model that runs here, offline, from npm packages (tools/localembed: "+strings.Join(localembed.Models, ", ")+"), instead of -embed-base-url; weak old models: their figures bound a current model's from below")
	fs.BoolVar(&o.docs, "docs", false, "instead of the usual report, run the knowledge-base retrieval check (testdata/docs): recall of the expected section by enrich's document chunks next to FTS5-BM25 over the same chunks; -limit takes the first N questions")
	fs.StringVar(&o.cvCache, "cv-cache", "", "with -cv: read the candidates from this file when it exists (no Postgres or NATS needed), else save them to it after ingesting; it holds the data's text: keep it out of the repository")
	fs.StringVar(&o.cvVariant, "cv-variant", "", "with -cv: cross-validate only the variants whose name holds this text (and the current constants)")
	fs.StringVar(&o.cvDrop, "cv-drop", "", "with -cv: instead of the cross-validation, report enrich's recall (current constants) with these keywords (space- or comma-separated) left out of every question's search, next to the search with them")
	fs.BoolVar(&o.verbose, "v", false, "log memoryd's warnings and errors")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cvDrop != "" && !o.cv {
		return errors.New("-cv-drop needs -cv")
	}
	if o.embedDims < 0 {
		return fmt.Errorf("-embed-dimensions must be positive, not %d", o.embedDims)
	}
	if o.embedLocal != "" {
		if o.embedBaseURL != "" {
			return errors.New("-embed-local and -embed-base-url are exclusive")
		}
		if !slices.Contains(localembed.Models, o.embedLocal) {
			return fmt.Errorf("-embed-local %q: the local models are %s", o.embedLocal, strings.Join(localembed.Models, ", "))
		}
	}
	level := slog.Level(100)
	if o.verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, format, a...) }
	if o.cv && o.cvCache != "" {
		if c, err := readCVCache(o.cvCache); err == nil {
			progress("candidates read from %s\n", o.cvCache)
			if o.cvDrop != "" {
				reportDrop(stdout, c, strings.FieldsFunc(strings.ToLower(o.cvDrop), isListSep))
				return nil
			}
			qs := cvQuestions(c)
			reportCV(stdout, c.Sets, qs, crossValidate(qs, len(c.Sets), cvVariantsNamed(o.cvVariant, hasVectors(qs)), progress))
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}

	if o.embedLocal != "" {
		srv, err := localembed.Start(ctx, 0, stderr)
		if err != nil {
			return err
		}
		defer srv.Stop()
		o.embedBaseURL, o.embedModel = srv.BaseURL, o.embedLocal
	}
	if o.embedDims > 0 {
		// The name memoryd stores the vectors under, which the report
		// shows (embedding.Config.StoredModel).
		o.embedStored = embedding.Config{Model: o.embedModel, Dimensions: o.embedDims}.StoredModel()
	} else {
		o.embedStored = o.embedModel
	}
	in, err := start(ctx, o, logger)
	if err != nil {
		return err
	}
	defer in.close(context.WithoutCancel(ctx))
	if o.docs {
		return runDocs(ctx, o, in, stdout, progress)
	}

	var sets []dataset
	for _, name := range strings.Split(o.datasets, ",") {
		var (
			hs   []haystack
			st   loadStats
			err  error
			file string
		)
		switch strings.TrimSpace(name) {
		case "locomo":
			file = "locomo-dev.json.gz"
			hs, st, err = loadLoCoMo(filepath.Join(o.dataDir, file), in.run)
		case "longmemeval":
			file = "longmemeval-s-dev.json.gz"
			hs, st, err = loadLongMemEval(filepath.Join(o.dataDir, file), in.run)
		default:
			return fmt.Errorf("unknown dataset %q (locomo, longmemeval)", name)
		}
		if err != nil {
			return err
		}
		if o.limit > 0 && len(hs) > o.limit {
			hs = hs[:o.limit]
		}
		sets = append(sets, dataset{name: strings.TrimSuffix(file, ".json.gz"), haystacks: hs, stats: st})
	}

	var all []haystack
	for _, s := range sets {
		all = append(all, s.haystacks...)
	}
	started := time.Now()
	progress("publishing and processing turn events:")
	last := -1
	if err := in.ingest(ctx, all, o.wait, func(done, total int) {
		if pct := done * 10 / max(total, 1); pct != last {
			progress(" %d/%d", done, total)
			last = pct
		}
	}); err != nil {
		progress("\n")
		return err
	}
	progress(" (%s)\n", time.Since(started).Round(time.Second))

	fts, err := newFTS5()
	if err != nil {
		return err
	}
	defer fts.db.Close()
	if o.cv {
		if in.emb != nil {
			progress("waiting for every item's vector\n")
			if err := in.app.WaitEmbedded(ctx, "", store.EmbeddingMark{}, nil); err != nil {
				return fmt.Errorf("embedding items: %w", err)
			}
		}
		progress("reading candidates\n")
		c, err := cvRead(ctx, in, sets, fts)
		if err != nil {
			return err
		}
		if o.cvCache != "" {
			if err := writeCVCache(o.cvCache, c); err != nil {
				return err
			}
		}
		if o.cvDrop != "" {
			reportDrop(stdout, c, strings.FieldsFunc(strings.ToLower(o.cvDrop), isListSep))
			return nil
		}
		qs := cvQuestions(c)
		reportCV(stdout, c.Sets, qs, crossValidate(qs, len(c.Sets), cvVariantsNamed(o.cvVariant, hasVectors(qs)), progress))
		return nil
	}
	mem := &memorydRanker{in: in, facts: events.FactsRelevant}
	rankers := []ranker{mem, fts, setCosine{}}
	if in.emb != nil {
		progress("waiting for every item's vector\n")
		if err := in.app.WaitEmbedded(ctx, "", store.EmbeddingMark{}, nil); err != nil {
			return fmt.Errorf("embedding items: %w", err)
		}
		lex, err := in.startLexical(ctx, logger)
		if err != nil {
			return err
		}
		mem.label = "memoryd hybrid"
		rankers = []ranker{mem, &memorydRanker{in: in, facts: events.FactsRelevant, client: lex, label: "memoryd lexical"},
			vectorRanker{in: in, emb: in.emb}, fts, setCosine{}}
	}
	const k = 10
	for si := range sets {
		s := &sets[si]
		progress("asking %s questions\n", s.name)
		s.hits = make([][]hitRow, len(rankers))
		for ri, r := range rankers {
			for _, h := range s.haystacks {
				ranked, err := r.rank(ctx, h, k)
				if err != nil {
					return fmt.Errorf("%s on %s %s: %w", r.name(), s.name, h.name, err)
				}
				for qi, q := range h.questions {
					s.hits[ri] = append(s.hits[ri], hitRow{category: q.category, rank: firstHit(ranked[qi], q.evidence)})
				}
			}
		}
	}
	// Knowledge updates are checked on the facts extraction stored, before
	// the fact load adds any.
	var ku []kuRow
	for _, s := range sets {
		if s.name == "longmemeval-s-dev" {
			progress("checking knowledge-update questions\n")
			if ku, err = knowledgeUpdates(ctx, in, s); err != nil {
				return err
			}
		}
	}
	progress("measuring injected tokens\n")
	tokenRuns, err := measureTokens(ctx, in, sets, "extracted", k)
	if err != nil {
		return err
	}
	if o.factLoad > 0 {
		progress("setting %d facts per user, measuring again\n", min(o.factLoad, len(factLoadKeys)))
		if err := in.setFactLoad(ctx, all, o.factLoad); err != nil {
			return err
		}
		more, err := measureTokens(ctx, in, sets, fmt.Sprintf("extracted + %d set", min(o.factLoad, len(factLoadKeys))), k)
		if err != nil {
			return err
		}
		tokenRuns = append(tokenRuns, more...)
	}
	extractorName := "offline rules (turns stored verbatim)"
	if in.llm {
		extractorName = "LLM " + o.llmModel + " (memoryd's items are what the model extracted; the baselines still index the raw turns)"
	}
	if in.emb != nil {
		extractorName += fmt.Sprintf("; embeddings %s at %s", o.embedStored, app.RedactURL(o.embedBaseURL))
	}
	report(stdout, sets, rankers, extractorName, mem.tookMS)
	reportTokens(stdout, tokenRuns)
	if ku != nil {
		reportKnowledgeUpdates(stdout, ku)
	}
	return nil
}

// dataset is one benchmark file's haystacks and, after the run, each
// ranker's first-hit rank per question.
type dataset struct {
	name      string
	haystacks []haystack
	stats     loadStats
	hits      [][]hitRow // [ranker][question]
}

type hitRow struct {
	category string
	rank     int // 1-based rank of the first evidence item; 0 when none in the top 10
}

func firstHit(ranked []string, evidence map[string]bool) int {
	for i, id := range ranked {
		if evidence[id] {
			return i + 1
		}
	}
	return 0
}

var ks = []int{1, 3, 5, 10}

// recall is the share of rows with a hit in the top k.
func recall(rows []hitRow, k int) float64 {
	if len(rows) == 0 {
		return 0
	}
	n := 0
	for _, r := range rows {
		if r.rank > 0 && r.rank <= k {
			n++
		}
	}
	return float64(n) / float64(len(rows))
}

func byCategory(rows []hitRow) (cats []string, groups map[string][]hitRow) {
	groups = map[string][]hitRow{}
	for _, r := range rows {
		if _, ok := groups[r.category]; !ok {
			cats = append(cats, r.category)
		}
		groups[r.category] = append(groups[r.category], r)
	}
	sort.Strings(cats)
	return cats, groups
}

func report(w io.Writer, sets []dataset, rankers []ranker, extractorName string, tookMS []float64) {
	fmt.Fprintf(w, "extractor: %s; enrich with threshold 0, max_results 10, at = the question's date\n\n", extractorName)
	fmt.Fprintf(w, "| set | questions | system | R@1 | R@3 | R@5 | R@10 |\n|---|---|---|---|---|---|---|\n")
	for _, s := range sets {
		mem := s.hits[0]
		for ri, r := range rankers {
			fmt.Fprintf(w, "| %s | %d | %s |", s.name, len(s.hits[ri]), r.name())
			for _, k := range ks {
				fmt.Fprintf(w, " %.3f |", recall(s.hits[ri], k))
			}
			fmt.Fprintln(w)
		}
		for ri := 1; ri < len(rankers); ri++ {
			fmt.Fprintf(w, "| %s | %d | memoryd / %s |", s.name, len(mem), rankers[ri].name())
			for _, k := range ks {
				fmt.Fprintf(w, " %s |", ratio(recall(mem, k), recall(s.hits[ri], k)))
			}
			fmt.Fprintln(w)
		}
	}
	for _, s := range sets {
		fmt.Fprintf(w, "\n%s by category (R@1 / R@5 / R@10)\n\n| category | questions |", s.name)
		for _, r := range rankers {
			fmt.Fprintf(w, " %s |", r.name())
		}
		fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(rankers)))
		cats, _ := byCategory(s.hits[0])
		for _, c := range cats {
			fmt.Fprintf(w, "| %s |", c)
			for ri := range rankers {
				_, g := byCategory(s.hits[ri])
				if ri == 0 {
					fmt.Fprintf(w, " %d |", len(g[c]))
				}
				fmt.Fprintf(w, " %.3f / %.3f / %.3f |", recall(g[c], 1), recall(g[c], 5), recall(g[c], 10))
			}
			fmt.Fprintln(w)
		}
		st := s.stats
		fmt.Fprintf(w, "\n%s: %d conversations/users, %d turn events; skipped %d adversarial, %d abstention, %d without evidence; %d turns not publishable (blank user message or reply without a user message)\n",
			s.name, len(s.haystacks), units(s.haystacks), st.skippedCategory, st.skippedAbstention, st.skippedNoEvidence, st.droppedTurns)
	}
	if len(tookMS) > 0 {
		sorted := append([]float64(nil), tookMS...)
		sort.Float64s(sorted)
		pct := func(p float64) float64 { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
		fmt.Fprintf(w, "\nenrich server time over %d requests (sequential, small per-user haystacks; not the 1M-row benchmark): p50 %.2f ms, p95 %.2f ms\n", len(sorted), pct(0.5), pct(0.95))
	}
}

func units(hs []haystack) int {
	n := 0
	for _, h := range hs {
		n += len(h.units)
	}
	return n
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// isListSep separates the words of a flag's list.
func isListSep(r rune) bool { return r == ' ' || r == ',' }
