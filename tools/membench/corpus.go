package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// corpus is what the enrich phase seeds and asks about: the users' items
// and facts, and the enrich messages.
type corpus interface {
	// name is the corpus's name in the table and in schema names.
	name() string
	// describe says what the corpus is made of, for the table.
	describe() string
	// users is how many users it has; users are 0..users()-1 (userID).
	users() int
	// items returns user u's context items (deterministic).
	items(u int) []seedItem
	// facts is how many facts each user gets.
	facts() int
	// workload returns n enrich requests for random users,
	// deterministic per seed.
	workload(n int, seed uint64) []request
}

// seedItem is one context item to seed.
type seedItem struct {
	question, answer string
	at               time.Time
	conversation     string
}

// synthetic is the generated corpus: o.items short items from a ~450-word
// vocabulary over o.users users, messages mostly about a user's own items.
type synthetic struct{ o *options }

func (c synthetic) name() string { return "synthetic" }
func (c synthetic) describe() string {
	return fmt.Sprintf("synthetic: %d items per user from a %d-word vocabulary (Zipf), messages 70%% about one of the user's items", c.o.items/c.o.users, len(vocabulary))
}
func (c synthetic) users() int { return c.o.users }
func (c synthetic) facts() int { return max(1, c.o.facts/c.o.users) }

func (c synthetic) items(u int) []seedItem {
	perUser := c.o.items / c.o.users
	r := rand.New(rand.NewPCG(uint64(u), 7))
	now := time.Now().UTC()
	out := make([]seedItem, perUser)
	for k := range out {
		q, a := item(u, k)
		out[k] = seedItem{question: q, answer: a, at: now.Add(-time.Duration(r.Int64N(int64(365 * 24 * time.Hour)))), conversation: fmt.Sprintf("c-%d", k/10)}
	}
	return out
}

func (c synthetic) workload(n int, seed uint64) []request { return workload(c.o, n, seed) }

// longMemEval is the realistic corpus: users made of LongMemEval-S haystack
// sessions (real user messages and assistant replies, one item per user
// message and the reply after it), each user a random sample of sessions
// cut to a size drawn uniformly from [minUserItems, maxUserItems], users
// added until the corpus holds o.realItems items. Sessions are reused
// across users (the dev file holds about 14,400 distinct pairs): fine for
// latency, which depends on a user's items, not on other users'. Messages
// are the dataset's questions.
type longMemEval struct {
	o         *options
	path      string
	sessions  []lmeSession
	questions []string
	plan      [][]int // per user: indexes into sessions, in order
	cut       []int   // per user: items taken from its last session
}

type lmeSession struct {
	date  time.Time
	pairs [][2]string
}

const (
	minUserItems = 100
	maxUserItems = 1000
)

func (c *longMemEval) name() string { return "longmemeval" }
func (c *longMemEval) describe() string {
	return fmt.Sprintf("LongMemEval-S haystack sessions (%s): users of %d–%d real turn pairs, %d distinct sessions reused across users; messages: the dataset's %d questions",
		filepath.Base(c.path), minUserItems, maxUserItems, len(c.sessions), len(c.questions))
}
func (c *longMemEval) users() int { return len(c.plan) }
func (c *longMemEval) facts() int { return 5 }

// loadLongMemEval reads the dataset and plans the users.
func loadLongMemEval(path string, o *options) (*longMemEval, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("realistic corpus: %w (the LongMemEval-S dev file; see --data)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("realistic corpus %s: %w", path, err)
	}
	var items []struct {
		QuestionID string   `json:"question_id"`
		Question   string   `json:"question"`
		SessionIDs []string `json:"haystack_session_ids"`
		Dates      []string `json:"haystack_dates"`
		Sessions   [][]struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"haystack_sessions"`
	}
	if err := json.NewDecoder(zr).Decode(&items); err != nil {
		return nil, fmt.Errorf("realistic corpus %s: %w", path, err)
	}
	c := &longMemEval{o: o, path: path}
	seen := map[string]bool{}
	for _, it := range items {
		if !strings.HasSuffix(it.QuestionID, "_abs") {
			c.questions = append(c.questions, it.Question)
		}
		for si, sess := range it.Sessions {
			if si >= len(it.SessionIDs) || si >= len(it.Dates) || seen[it.SessionIDs[si]] {
				continue
			}
			seen[it.SessionIDs[si]] = true
			date, err := time.Parse("2006/01/02 (Mon) 15:04", strings.TrimSpace(it.Dates[si]))
			if err != nil {
				return nil, fmt.Errorf("realistic corpus: session %s: %w", it.SessionIDs[si], err)
			}
			s := lmeSession{date: date}
			for ti := 0; ti < len(sess); ti++ {
				if sess[ti].Role != "user" || strings.TrimSpace(sess[ti].Content) == "" {
					continue
				}
				p := [2]string{sess[ti].Content, ""}
				if ti+1 < len(sess) && sess[ti+1].Role == "assistant" {
					ti++
					p[1] = sess[ti].Content
				}
				s.pairs = append(s.pairs, p)
			}
			if len(s.pairs) > 0 {
				c.sessions = append(c.sessions, s)
			}
		}
	}
	if len(c.sessions) == 0 || len(c.questions) == 0 {
		return nil, fmt.Errorf("realistic corpus %s: no sessions or no questions", path)
	}
	// Users until the corpus holds o.realItems items.
	for total := 0; total < o.realItems; {
		u := len(c.plan)
		r := rand.New(rand.NewPCG(uint64(u), 0x6c6d65))
		want := minUserItems + r.IntN(maxUserItems-minUserItems+1)
		var plan []int
		n, cut := 0, 0
		for _, si := range r.Perm(len(c.sessions)) {
			k := len(c.sessions[si].pairs)
			plan = append(plan, si)
			if n+k >= want {
				cut = want - n
				n = want
				break
			}
			n += k
		}
		c.plan = append(c.plan, plan)
		c.cut = append(c.cut, cut)
		total += n
	}
	return c, nil
}

func (c *longMemEval) items(u int) []seedItem {
	var out []seedItem
	plan := c.plan[u]
	for i, si := range plan {
		s := c.sessions[si]
		pairs := s.pairs
		if i == len(plan)-1 && c.cut[u] > 0 {
			pairs = pairs[:c.cut[u]]
		}
		for k, p := range pairs {
			out = append(out, seedItem{question: p[0], answer: p[1], at: s.date.Add(time.Duration(k) * time.Minute), conversation: fmt.Sprintf("s-%d", si)})
		}
	}
	return out
}

func (c *longMemEval) workload(n int, seed uint64) []request {
	r := rand.New(rand.NewPCG(seed, 0x71))
	out := make([]request, n)
	for i := range out {
		out[i] = request{user: r.IntN(len(c.plan)), message: c.questions[r.IntN(len(c.questions))]}
	}
	return out
}

// lengthDist is the distribution of items' lengths (question plus answer,
// bytes) and of items per user, over what was seeded.
type lengthDist struct {
	items, users                                       int
	p10, p50, p90, p99, max, mean                      int
	perUserMin, perUserP50, perUserMax, perUserMeanInt int
}

func (d lengthDist) String() string {
	return fmt.Sprintf("item length (question + answer, bytes) p10 %d, p50 %d, p90 %d, p99 %d, max %d, mean %d; items per user min %d, p50 %d, max %d, mean %d",
		d.p10, d.p50, d.p90, d.p99, d.max, d.mean, d.perUserMin, d.perUserP50, d.perUserMax, d.perUserMeanInt)
}

func newLengthDist(lens, perUser []int) lengthDist {
	slices.Sort(lens)
	slices.Sort(perUser)
	pct := func(s []int, p float64) int {
		if len(s) == 0 {
			return 0
		}
		return s[min(len(s)-1, max(0, int(p*float64(len(s))+0.5)-1))]
	}
	var sum, usum int
	for _, l := range lens {
		sum += l
	}
	for _, n := range perUser {
		usum += n
	}
	d := lengthDist{items: len(lens), users: len(perUser)}
	if len(lens) > 0 {
		d.p10, d.p50, d.p90, d.p99, d.max, d.mean = pct(lens, .1), pct(lens, .5), pct(lens, .9), pct(lens, .99), lens[len(lens)-1], sum/len(lens)
	}
	if len(perUser) > 0 {
		d.perUserMin, d.perUserP50, d.perUserMax, d.perUserMeanInt = perUser[0], pct(perUser, .5), perUser[len(perUser)-1], usum/len(perUser)
	}
	return d
}

// corpusLengths measures c's item lengths without seeding (the same items
// seed writes, before the per-user dedup of identical pairs).
func corpusLengths(c corpus) lengthDist {
	var lens, perUser []int
	for u := range c.users() {
		its := c.items(u)
		perUser = append(perUser, len(its))
		for _, it := range its {
			lens = append(lens, len(it.question)+len(it.answer))
		}
	}
	return newLengthDist(lens, perUser)
}
