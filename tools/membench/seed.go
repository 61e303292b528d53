package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
)

// vocabulary is the content words texts are made of, roughly most common
// first: words are drawn with a Zipf distribution, so that, as in real
// conversations, a few words occur in many of a user's items and most in few.
var vocabulary = strings.Fields(`
	time work project code error file server database query table index
	user account password email phone message meeting calendar schedule
	team manager report budget invoice payment price order customer
	product release version update install config setting option feature
	function method class module package library framework test build deploy
	docker container kubernetes cluster node network proxy cache memory disk
	backup restore migration schema column row key value json yaml api endpoint
	request response timeout retry latency throughput queue worker job event
	stream topic subject subscriber publisher log metric alert dashboard trace
	python golang rust java javascript typescript react vue html css linux
	windows macos laptop keyboard monitor printer router wifi bluetooth battery
	recipe dinner lunch breakfast coffee tea pasta pizza salad soup bread cake
	garden flower tree plant tomato potato apple banana orange lemon garlic
	travel flight hotel train ticket passport visa airport luggage beach
	mountain river lake city village country museum concert festival movie
	book novel author poem song music guitar piano violin drum band album
	doctor dentist appointment medicine allergy vitamin exercise running
	cycling swimming yoga gym weight diet sleep headache fever insurance
	school university course exam homework lecture teacher student degree
	thesis research paper article journal conference presentation slide
	car bike bus engine tire brake fuel parking license repair garage
	house apartment rent mortgage kitchen bathroom bedroom furniture sofa
	lamp window door roof heating boiler plumber electrician paint carpet
	birthday wedding anniversary holiday vacation christmas party gift
	family mother father sister brother daughter son wife husband friend
	neighbor colleague dog cat puppy kitten bird fish horse rabbit
	weather rain snow storm wind sunshine temperature forecast season
	spring summer autumn winter morning evening weekend monday friday
	spreadsheet formula chart pivot macro document template signature
	contract lawyer court tax refund salary pension loan credit bank
	stock bond fund crypto wallet exchange portfolio dividend interest
	photo camera lens tripod video editing drone microphone speaker
	game chess puzzle football tennis basketball baseball golf hockey
	language spanish french german italian portuguese japanese chinese
	grammar vocabulary pronunciation translation dictionary accent
	algorithm graph tree heap sort search hash matrix vector tensor
	model training dataset gradient neural transformer embedding token
	prompt inference accuracy benchmark profile allocation goroutine
	thread mutex channel deadlock panic stack pointer slice map struct
	interface generic compiler linker binary debug breakpoint variable
	constant loop branch commit merge rebase branch pull push review
	issue ticket sprint roadmap milestone deadline estimate priority
	`)

var vocabSet = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range vocabulary {
		m[w] = true
	}
	return m
}()

// questionTemplates and answerTemplates make context items; %s are
// vocabulary words.
var questionTemplates = []string{
	"How do I fix the %s %s in my %s?",
	"What is the best way to set up a %s for the %s %s?",
	"Why does my %s keep failing when the %s %s changes?",
	"Can you explain how %s and %s work together with %s?",
	"Which %s should I pick for the %s %s?",
	"What did we decide about the %s %s and the %s?",
}

var answerTemplates = []string{
	"Check the %s first, then restart the %s and compare the %s with the previous one.",
	"The %s depends on the %s, so update the %s before anything else.",
	"Use a separate %s for the %s and keep the %s small; it is easier to reason about.",
	"Most people move the %s next to the %s and schedule the %s for the weekend.",
	"It is usually the %s: clear it, then look at the %s and the %s again.",
}

var messageTemplates = []string{
	"Can you remind me what we said about the %s %s?",
	"I'm working on the %s again, any tips for the %s and %s?",
	"What was the fix for my %s problem with the %s?",
	"Tell me again how to handle the %s %s %s.",
	"Hey, quick one: %s or %s for the %s?",
}

var factKeys = []string{"name", "location", "employer", "occupation", "favorite_food", "pet", "language", "hobby"}

// words draws vocabulary words with a Zipf distribution.
type words struct {
	r *rand.Rand
	z *rand.Zipf
}

func newWords(seed uint64) *words {
	r := rand.New(rand.NewPCG(seed, 0x6d656d6f7279))
	return &words{r: r, z: rand.NewZipf(r, 1.07, 8, uint64(len(vocabulary)-1))}
}

func (w *words) next() string { return vocabulary[w.z.Uint64()] }

func (w *words) fill(tmpl string) string {
	n := strings.Count(tmpl, "%s")
	args := make([]any, n)
	for i := range args {
		args[i] = w.next()
	}
	return fmt.Sprintf(tmpl, args...)
}

// userID is the id of seeded user u.
func userID(u int) string { return fmt.Sprintf("user%05d", u) }

// item returns context item k of user u (deterministic, so that messages
// can be made from a user's own items without keeping them).
func item(u, k int) (question, answer string) {
	w := newWords(uint64(u)<<20 | uint64(k))
	question = w.fill(questionTemplates[w.r.IntN(len(questionTemplates))])
	answer = w.fill(answerTemplates[w.r.IntN(len(answerTemplates))]) + " " + w.fill(answerTemplates[w.r.IntN(len(answerTemplates))])
	return question, answer
}

// message returns a realistic enrich message for user u: most often about
// one of the user's own items (two of its words plus a common word), else
// about anything.
func message(r *rand.Rand, w *words, u, itemsPerUser int) string {
	tmpl := messageTemplates[r.IntN(len(messageTemplates))]
	n := strings.Count(tmpl, "%s")
	args := make([]any, n)
	for i := range args {
		args[i] = w.next()
	}
	if r.IntN(10) < 7 && itemsPerUser > 0 {
		q, _ := item(u, r.IntN(itemsPerUser))
		var content []string
		for _, f := range strings.Fields(strings.Trim(q, "?")) {
			if vocabSet[f] {
				content = append(content, f)
			}
		}
		for i := 0; i < len(args)-1 && i < len(content); i++ {
			args[i] = content[r.IntN(len(content))]
		}
	}
	return fmt.Sprintf(tmpl, args...)
}

// seed fills the schema at url with c's context items and facts, with
// COPY. Secondary indexes are dropped first and rebuilt afterwards with their
// exact definitions (faster than maintaining them row by row); the unique
// constraint stays.
func seed(ctx context.Context, url string, c corpus) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	start := time.Now()
	rows, err := pool.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema() AND i.tablename = 'context'
		AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.connamespace = current_schema()::regnamespace)`)
	if err != nil {
		return err
	}
	type index struct{ Name, Def string }
	indexes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[index])
	if err != nil {
		return err
	}
	for _, ix := range indexes {
		if _, err := pool.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix.Name}.Sanitize()); err != nil {
			return err
		}
	}

	now := time.Now().UTC()
	users := c.users()
	cols := []string{"user_id", "question", "answer", "created_at", "event_id", "conversation_id", "content_hash", "extractor"}
	const parts = 2
	var wg sync.WaitGroup
	errs := make([]error, parts)
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, k := p, 0
			its := []seedItem(nil)
			if u < users {
				its = c.items(u)
			}
			seen := map[string]bool{}
			row := make([]any, len(cols))
			src := pgx.CopyFromFunc(func() ([]any, error) {
				for {
					if k == len(its) {
						u, k = u+parts, 0
						clear(seen)
						if u >= users {
							return nil, nil
						}
						its = c.items(u)
						continue
					}
					it := its[k]
					uid := userID(u)
					h := store.ContentHash(uid, it.question, it.answer)
					k++
					if seen[string(h)] {
						continue // the same pair twice: COPY would hit the unique key
					}
					seen[string(h)] = true
					row[0], row[1], row[2], row[3] = uid, it.question, it.answer, it.at
					row[4], row[5], row[6], row[7] = fmt.Sprintf("seed-%d-%d", u, k), it.conversation, h, "seed"
					return row, nil
				}
			})
			_, errs[p] = pool.CopyFrom(ctx, pgx.Identifier{"context"}, cols, src)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("copy context: %w", err)
		}
	}
	logf("seeded context rows in %s; building %d indexes", time.Since(start).Round(time.Second), len(indexes))
	// Build the indexes two at a time (one per core), the GIN one first.
	sem := make(chan struct{}, 2)
	ierrs := make([]error, len(indexes))
	for i, ix := range indexes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				ierrs[i] = err
				return
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '256MB'"); err != nil {
				ierrs[i] = err
				return
			}
			_, ierrs[i] = conn.Exec(ctx, ix.Def)
		}()
	}
	wg.Wait()
	for _, err := range ierrs {
		if err != nil {
			return fmt.Errorf("create index: %w", err)
		}
	}

	// Facts: c.facts() per user, keys from factKeys.
	perUserFacts := c.facts()
	var fu, fk int
	r := rand.New(rand.NewPCG(42, 42))
	w := newWords(42)
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"facts"}, []string{"user_id", "key", "value", "source_at", "event_id", "extractor"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if fk == perUserFacts {
				fu, fk = fu+1, 0
			}
			if fu >= users || fk >= len(factKeys) {
				return nil, nil
			}
			fk++
			return []any{userID(fu), factKeys[fk-1], w.next() + " " + w.next(), now.Add(-time.Duration(r.Int64N(int64(365 * 24 * time.Hour)))), "seed", "seed"}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy facts: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE context"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE facts"); err != nil {
		return err
	}
	// The term statistics the COPY filled (migrations/025): vacuumed, their
	// primary key's scans are index-only, as autovacuum makes them in use.
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE context_terms"); err != nil {
		return err
	}
	// Write the seeded pages out now, so that the checkpoint the bulk load
	// triggers does not run during the measurements. It needs superuser
	// (or pg_checkpoint); without it the figures may be noisier.
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		logf("CHECKPOINT after seeding failed (%v); the first measurements may overlap the server's own checkpoint", err)
	}
	logf("seeded and indexed in %s", time.Since(start).Round(time.Second))
	return nil
}
