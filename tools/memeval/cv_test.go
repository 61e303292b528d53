package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/ranking"
)

// TestCrossValidateHoldsOut checks that each fold's constants are chosen
// on the other folds only: four small folds prefer a high answer weight,
// one large fold the default; each fold is then ranked with what the others
// prefer, and the constants chosen on every fold are the default.
func TestCrossValidateHoldsOut(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	question := func(fold int, evidenceInAnswer bool) cvQuestion {
		inAnswer := ranking.Doc{ID: 1, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Answer: 1}}}
		inQuestion := ranking.Doc{ID: 2, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Question: 1}}}
		ev := "q"
		if evidenceInAnswer {
			ev = "a"
		}
		return cvQuestion{folds: slices.Repeat([]int{fold}, cvRepeats), coll: ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5},
			docs: []ranking.Doc{inAnswer, inQuestion}, events: []string{"a", "q"}, at: at, evidence: map[string]bool{ev: true}}
	}
	var qs []cvQuestion
	for f := range 4 {
		qs = append(qs, question(f, true), question(f, true))
	}
	for range 9 {
		qs = append(qs, question(4, false))
	}
	def := ranking.DefaultParams()
	high := def
	high.AnswerWeight = 3
	res := crossValidate(qs, 1, []cvVariant{{name: "answer weight", grid: []ranking.Params{def, high}, forms: stemNone}}, func(string, ...any) {})
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	r := res[0]
	if r.final != def {
		t.Errorf("chosen on every fold: %+v, want the defaults", r.final)
	}
	for f := range cvFolds {
		fr := r.folds[0][f]
		want := def // the large fold outweighs the other three small ones
		if f == 4 {
			want = high // only the small folds
		}
		if fr.chosen != want {
			t.Errorf("fold %d chose %s, want %s", f, paramsDiff(fr.chosen), paramsDiff(want))
		}
		// Either way the held-out fold is ranked against its preference.
		if got := cvRecall(fr.ranks, fr.sel, 1); got != 0 {
			t.Errorf("fold %d held-out R@1 %.3f, want 0", f, got)
		}
		if got := cvRecall(fr.ranks, fr.sel, 5); got != 1 {
			t.Errorf("fold %d held-out R@5 %.3f, want 1", f, got)
		}
	}
}

func TestQueryForms(t *testing.T) {
	lexemes := map[string][]string{
		"teams": {"team"}, "team": {"team"}, "pay": {"pay"}, "paying": {"pay"}, "holidays": {"holiday"}, "holiday": {"holiday"},
		"vacation": {"vacat"}, "vacations": {"vacat"}, "self-care": {"self", "care", "self-car"},
	}
	terms := []string{"team", "pay", "holiday", "vacat", "care"}
	tests := []struct {
		name    string
		kws     []string
		guarded bool
		want    [][]string
	}{
		{"every lexeme", []string{"teams", "paying", "holidays", "vacations", "self-care"}, false,
			[][]string{{"teams"}, {"paying"}, {"holidays"}, {"vacations"}, nil}},
		{"two words of one lexeme", []string{"team", "teams"}, false, [][]string{{"team", "teams"}, nil, nil, nil, nil}},
		{"guarded: short lexemes, and long ones whose query word is not inflected", []string{"teams", "paying", "holidays", "vacation"}, true,
			[][]string{{"teams"}, {"paying"}, nil, nil, nil}},
		{"guarded: a long lexeme asked uninflected", []string{"holiday", "holidays"}, true, [][]string{nil, nil, {"holiday", "holidays"}, nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := queryForms(terms, tt.kws, lexemes, tt.guarded)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("queryForms = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInflectedCounts(t *testing.T) {
	tc := func(q, a int32) ranking.TermCount { return ranking.TermCount{Present: true, Question: q, Answer: a} }
	tests := []struct {
		name             string
		terms            []ranking.TermCount
		forms            [][]string
		question, answer string
		want             []ranking.TermCount
	}{
		{"exact form", []ranking.TermCount{tc(1, 0)}, [][]string{{"pay"}}, "I pay rent", "", []ranking.TermCount{tc(0, 0)}},
		{"another form", []ranking.TermCount{tc(1, 1)}, [][]string{{"pay"}}, "Paying off the loan", "you are paying", []ranking.TermCount{tc(1, 1)}},
		{"both, any case", []ranking.TermCount{tc(2, 0)}, [][]string{{"pay"}}, "PAY now, paying later", "", []ranking.TermCount{tc(1, 0)}},
		{"no forms: not told apart", []ranking.TermCount{tc(1, 0)}, [][]string{nil}, "paying", "", []ranking.TermCount{{}}},
		{"absent term", []ranking.TermCount{{}}, [][]string{{"pay"}}, "", "", []ranking.TermCount{{}}},
		{"more exact words than positions", []ranking.TermCount{tc(1, 0)}, [][]string{{"team"}}, "team team", "", []ranking.TermCount{tc(0, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inflectedCounts(tt.terms, tt.forms, tt.question, tt.answer); !slices.Equal(got, tt.want) {
				t.Fatalf("inflectedCounts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		xs   []float64
		want string
	}{
		{nil, "0.000 (0.000 – 0.000)"},
		{[]float64{0.5}, "0.500 (0.500 – 0.500)"},
		{[]float64{0.2, 0.6, 0.4}, "0.400 (0.200 – 0.600)"},
	}
	for _, tt := range tests {
		if got := spread(tt.xs); got != tt.want {
			t.Errorf("spread(%v) = %q, want %q", tt.xs, got, tt.want)
		}
	}
	if got := spreadSigned([]float64{-0.1, 0.3}); got != "+0.100 (-0.100 – +0.300)" {
		t.Errorf("spreadSigned = %q", got)
	}
}

// TestRunCV runs the -cv mode on one conversation and one question and
// checks that the current constants, ranked offline from the store's
// candidates, give exactly the recall memory.enrich gives in the usual
// report: the cross-validation measures the service's ranking. A second
// run from the candidates saved by the first (-cv-cache) prints the same.
func TestRunCV(t *testing.T) {
	data := env("MEMEVAL_DATA", "/work/shared/data")
	if _, err := os.Stat(filepath.Join(data, "locomo-dev.json.gz")); err != nil {
		t.Skipf("no dev data: %v", err)
	}
	run1 := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if err := run(t.Context(), append([]string{"-limit", "1", "-datasets", "locomo", "-fact-load", "0", "-data", data}, args...), &out, &errOut); err != nil {
			t.Fatalf("memeval %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	// cells returns the first row starting with prefix that has n columns.
	cells := func(out, prefix string, n int) []string {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			if c := strings.Split(line, "|"); strings.HasPrefix(line, prefix) && len(c) == n+2 {
				for i := range c {
					c[i] = strings.TrimSpace(c[i])
				}
				return c
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, out)
		return nil
	}
	cache := filepath.Join(t.TempDir(), "cv.gob")
	cv := run1("-cv", "-cv-cache", cache)
	if again := run1("-cv", "-cv-cache", cache); again != cv {
		t.Errorf("-cv from the saved candidates differs:\n%s\nfirst run:\n%s", again, cv)
	}
	enrich := cells(run1(), "| locomo-dev | ", 7)
	cur := cells(cv, "| current constants | ", 11)
	// enrich: | set | questions | memoryd | R@1 | R@3 | R@5 | R@10 |;
	// cv summary: | variant | R@1 mean | R@5 mean | R@1..R@10 pooled |.
	if enrich[3] != "memoryd" {
		t.Fatalf("first locomo row is %q, want memoryd's", enrich[3])
	}
	if got, want := cur[4:8], enrich[4:8]; !slices.Equal(got, want) {
		t.Errorf("cv current constants R@1/3/5/10 %v, enrich %v", got, want)
	}
	for _, v := range cvVariants() {
		cells(cv, "| "+v.name+" | ", 11)
	}
	fts := cells(cv, "| FTS5-BM25 | ", 11)
	if fts[4] == "" {
		t.Fatalf("no FTS5-BM25 figures: %v", fts)
	}
}

func TestAdjacentCount(t *testing.T) {
	terms := []string{"pottery", "class", "sweden"}
	forms := [][]string{{"pottery"}, {"classes"}, nil}
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"I signed up for a pottery class", 1},
		{"Pottery classes, then pottery.", 1}, // punctuation does not separate
		{"class pottery class", 2},            // both orders
		{"pottery pottery class", 1},          // one lexeme twice is no pair
		{"pottery and class", 0},              // not adjacent
		{"classic pottery", 1},                // stems as prefixes
		{"the pottery: class sweden trip", 2}, // a chain of three
		{"potter class", 0},                   // not the lexeme
	}
	for _, tt := range tests {
		if got := adjacentCount(terms, forms, tt.text); got != tt.want {
			t.Errorf("adjacentCount(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// answerOrQuestion is a question of set and fold (in every repeat) with
// two candidates holding its one word, one in its question half and one in
// its answer half: the evidence is the answer's with evidenceInAnswer. The
// defaults rank the question's first; an answer weight of 3 the answer's.
func answerOrQuestion(set, fold int, evidenceInAnswer bool) cvQuestion {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	inAnswer := ranking.Doc{ID: 1, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Answer: 1}}}
	inQuestion := ranking.Doc{ID: 2, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Question: 1}}}
	ev := "q"
	if evidenceInAnswer {
		ev = "a"
	}
	return cvQuestion{set: set, folds: slices.Repeat([]int{fold}, cvRepeats), coll: ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5},
		docs: []ranking.Doc{inAnswer, inQuestion}, events: []string{"a", "q"}, at: at, evidence: map[string]bool{ev: true}}
}

// TestNoSetWorse checks the guarded choice: a change that gains one set
// much and costs the other a little is chosen on the mean, and not when no
// set may be worse.
func TestNoSetWorse(t *testing.T) {
	var qs []cvQuestion
	for f := range cvFolds {
		// Set 0: every question's evidence is in the answer (a high answer
		// weight gains R@1 1.0); set 1: one question in ten (it loses 0.8).
		qs = append(qs, answerOrQuestion(0, f, true))
		for i := range 10 {
			qs = append(qs, answerOrQuestion(1, f, i == 0))
		}
	}
	def := ranking.DefaultParams()
	high := def
	high.AnswerWeight = 3
	for _, guarded := range []bool{false, true} {
		res := crossValidate(qs, 2, []cvVariant{{name: "answer weight", grid: []ranking.Params{def, high}, forms: stemNone, noSetWorse: guarded}}, func(string, ...any) {})
		want := high
		if guarded {
			want = def
		}
		for k, fr := range res[0].folds[0] {
			if fr.chosen != want {
				t.Errorf("no set worse %v: fold %d chose %s, want %s", guarded, k, paramsDiff(fr.chosen), paramsDiff(want))
			}
		}
	}
}

// TestFoldsOf checks the repeats' folds: a set of cvFolds conversations
// keeps one conversation a fold in every repeat; a set of many haystacks is
// dealt i mod cvFolds first, then anew, every repeat's folds within one of
// each other in size.
func TestFoldsOf(t *testing.T) {
	var inputs []cvInput
	for h := range 5 {
		for range 3 {
			inputs = append(inputs, cvInput{Set: 0, Haystack: fmt.Sprint("conv", h)})
		}
	}
	for h := range 57 {
		inputs = append(inputs, cvInput{Set: 1, Haystack: fmt.Sprint("q", h)})
	}
	folds := cvFoldsOf(inputs)
	reshuffled := false
	for r := range cvRepeats {
		size := make([]int, cvFolds)
		for i, in := range inputs {
			f := folds[i][r]
			if in.Set == 0 {
				if f != i/3 {
					t.Fatalf("repeat %d: conversation %s in fold %d", r, in.Haystack, f)
				}
				continue
			}
			size[f]++
			if r == 0 && f != (i-15)%cvFolds {
				t.Fatalf("repeat 0: question %s in fold %d", in.Haystack, f)
			}
			reshuffled = reshuffled || f != folds[i][0]
		}
		if slices.Max(size)-slices.Min(size) > 1 {
			t.Errorf("repeat %d: fold sizes %v", r, size)
		}
	}
	if !reshuffled {
		t.Error("no repeat deals the questions anew")
	}
}

// TestPairedStatistics checks the sign test against binomial tails worked
// by hand, and the bootstrap interval on samples whose answer is known.
func TestPairedStatistics(t *testing.T) {
	for _, tt := range []struct {
		won, lost int
		want      float64
	}{
		{0, 0, 1}, {4, 4, 1}, {10, 0, 2.0 / 1024}, {0, 10, 2.0 / 1024},
		{1, 5, 2 * 7.0 / 64}, // P(X ≤ 1) = (1 + 6)/64
		{4, 0, 2.0 / 16},
	} {
		if got := signTest(tt.won, tt.lost); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("signTest(%d, %d) = %g, want %g", tt.won, tt.lost, got, tt.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if m, lo, hi := bootstrapMean([]float64{1, 1, 1}, 100, rng); m != 1 || lo != 1 || hi != 1 {
		t.Errorf("constant sample: %g (%g – %g), want 1 (1 – 1)", m, lo, hi)
	}
	// 4 wins and 4 losses among 57: the mean is 0 and the interval holds
	// it, about ±2·sqrt(8/57)/sqrt(57) wide.
	xs := make([]float64, 57)
	for i := range 4 {
		xs[i], xs[4+i] = 1, -1
	}
	m, lo, hi := bootstrapMean(xs, 10000, rng)
	if m != 0 || lo >= 0 || hi <= 0 {
		t.Errorf("balanced sample: %g (%g – %g), want 0 inside the interval", m, lo, hi)
	}
	half := 1.96 * math.Sqrt(8.0/57) / math.Sqrt(57)
	if math.Abs(-lo-half) > 0.02 || math.Abs(hi-half) > 0.02 {
		t.Errorf("balanced sample interval %g – %g, want about ±%.3f", lo, hi, half)
	}
	if sd := stddev([]float64{1, -1}); math.Abs(sd-math.Sqrt2) > 1e-12 {
		t.Errorf("stddev(1, -1) = %g, want √2", sd)
	}
}

// Reciprocal-rank fusion: a ranking fused with itself keeps its order, and
// a partner that puts the evidence first lifts it when weighed enough.
func TestFusedRanks(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The evidence ("a") holds the word in its long answer; "q" in its
	// short question. The defaults weigh the answer down, so "q" leads;
	// a ranking weighing the answer three times puts "a" first.
	inAnswer := ranking.Doc{ID: 1, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Answer: 1}}}
	inQuestion := ranking.Doc{ID: 2, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Question: 1}}}
	qs := []cvQuestion{{coll: ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5},
		docs: []ranking.Doc{inAnswer, inQuestion}, events: []string{"a", "q"}, at: at, evidence: map[string]bool{"a": true}}}
	def := ranking.DefaultParams()
	high := def
	high.AnswerWeight = 3
	if got := cvRanks(qs, def, stemNone)[0]; got != 2 {
		t.Fatalf("the defaults rank the evidence %d, want 2", got)
	}
	for _, c := range []struct {
		with ranking.Params
		w    float64
		want int8
	}{
		{def, 1, 2},    // fused with itself: the same order
		{high, 0.5, 2}, // the partner weighed less: the first ranking's order
		{high, 2, 1},   // weighed more: the partner's
	} {
		if got := cvFusedRanks(qs, def, cvFusion{with: c.with, K: 10, W: c.w})[0]; got != c.want {
			t.Errorf("fused with W %g: evidence at %d, want %d", c.w, got, c.want)
		}
	}
}

// TestTimeRanks checks the time variants on a ranged question whose
// evidence was told the day after its one-day range, next to a turn in the
// range that holds a common query word only: enrich's way (the range
// widened past its end by its length, ranked with the memory's document
// frequencies) finds the evidence, as cvQuestions picks it; the range's
// candidates alone with the range's statistics (enrich before) rank the
// turn in the range alone.
func TestTimeRanks(t *testing.T) {
	day := time.Date(2022, 5, 1, 0, 0, 0, 0, time.UTC)
	counts := func(a, b int32) []ranking.TermCount {
		return []ranking.TermCount{{Present: a > 0, Question: a}, {Present: b > 0, Question: b}}
	}
	ci := cvInput{Set: 0, Haystack: "conv0", Keywords: []string{"joanna", "movie"}, Terms: []string{"joanna", "movi"},
		Coll: ranking.Collection{Items: 100, AvgQuestionLen: 10, AvgAnswerLen: 10}, At: day.AddDate(0, 1, 0),
		Evidence: map[string]bool{"e2": true}, Ranged: true, Since: day, Until: day.AddDate(0, 0, 1),
		RankedUntil: day.AddDate(0, 0, 2), DF: []int{3, 1},
		Matches: []cvMatch{
			{ID: 1, CreatedAt: day.Add(10 * time.Hour), QuestionLen: 10, AnswerLen: 10, Counts: counts(1, 0), EventID: "e1"},
			{ID: 2, CreatedAt: day.Add(34 * time.Hour), QuestionLen: 10, AnswerLen: 10, Counts: counts(1, 2), EventID: "e2"},
			{ID: 3, CreatedAt: day.AddDate(0, 0, -20), QuestionLen: 10, AnswerLen: 10, Counts: counts(1, 0), EventID: "e3"},
		}}
	qs := cvQuestions(&cvCache{Sets: []string{"s"}, Inputs: []cvInput{ci}, Lexemes: map[string][]string{}})
	if !slices.Equal(qs[0].events, []string{"e1", "e2"}) || !slices.Equal(qs[0].df, ci.DF) {
		t.Fatalf("enrich's candidates %v with DF %v, want e1 and e2 of the widened range with %v", qs[0].events, qs[0].df, ci.DF)
	}
	if got, want := cvTimeRanks(qs, cvEnrichTime)[0], cvRanks(qs, ranking.DefaultParams(), stemNone)[0]; got != want || got != 1 {
		t.Errorf("enrich's way: rank %d, cvRanks %d; want 1 both", got, want)
	}
	if got := cvTimeRanks(qs, cvTime{filter: true, rangeDF: true})[0]; got != 0 {
		t.Errorf("the range's candidates and statistics: evidence at rank %d, want 0", got)
	}
	for _, tm := range []cvTime{{filter: true, rangeDF: true, margin: 1}, {filter: true, margin: 0.5}, {factor: 0.5}} {
		if got := cvTimeRanks(qs, tm)[0]; got != 1 && !(tm.margin == 0 && got == 2) {
			t.Errorf("%s: evidence at rank %d", tm, got)
		}
	}
}

// TestRangedDF: enrich ranks a ranged question's candidates with the
// memory's document frequencies (cvInput.DF), not the range's: in a range
// where the question's two words are each in one candidate, the rarer
// word's candidate leads, not the newer one.
func TestRangedDF(t *testing.T) {
	day := time.Date(2022, 5, 1, 0, 0, 0, 0, time.UTC)
	ci := cvInput{Set: 0, Haystack: "conv0", Keywords: []string{"joanna", "movie"}, Terms: []string{"joanna", "movi"},
		Coll: ranking.Collection{Items: 100, AvgQuestionLen: 10, AvgAnswerLen: 10}, At: day.AddDate(0, 1, 0),
		Evidence: map[string]bool{"e2": true}, Ranged: true, Since: day, Until: day.AddDate(0, 0, 1),
		RankedUntil: day.AddDate(0, 0, 2), DF: []int{40, 1},
		Matches: []cvMatch{
			{ID: 1, CreatedAt: day.Add(20 * time.Hour), QuestionLen: 10, AnswerLen: 10, Counts: []ranking.TermCount{{Present: true, Question: 1}}, EventID: "e1"},
			{ID: 2, CreatedAt: day.Add(10 * time.Hour), QuestionLen: 10, AnswerLen: 10, Counts: []ranking.TermCount{{}, {Present: true, Question: 1}}, EventID: "e2"},
		}}
	qs := cvQuestions(&cvCache{Sets: []string{"s"}, Inputs: []cvInput{ci}, Lexemes: map[string][]string{}})
	if got := cvRanks(qs, ranking.DefaultParams(), stemNone)[0]; got != 1 {
		t.Errorf("with the memory's frequencies: evidence at rank %d, want 1", got)
	}
	qs[0].df = nil
	if got := cvRanks(qs, ranking.DefaultParams(), stemNone)[0]; got != 2 {
		t.Errorf("with the range's frequencies: evidence at rank %d, want 2 (the newer candidate first)", got)
	}
}

// TestOneSE checks the one-standard-error choice: a gain of every training
// question is taken, a net gain of one question (two won, one lost) among
// many unchanged is not, where the plain choice takes both.
func TestOneSE(t *testing.T) {
	def := ranking.DefaultParams()
	high := def
	high.AnswerWeight = 3
	unchanged := func(set, fold int) cvQuestion { // one candidate: first whatever the weight
		q := answerOrQuestion(set, fold, false)
		q.docs, q.events = q.docs[1:], q.events[1:]
		return q
	}
	tests := []struct {
		name      string
		questions func(fold int) []cvQuestion
		plain     []ranking.Params // chosen on folds 0..4 of repeat 0
		oneSE     []ranking.Params
	}{
		{
			name: "every question gains",
			questions: func(f int) []cvQuestion {
				return []cvQuestion{answerOrQuestion(0, f, true), answerOrQuestion(0, f, true), answerOrQuestion(1, f, true)}
			},
			plain: []ranking.Params{high, high, high, high, high},
			oneSE: []ranking.Params{high, high, high, high, high},
		},
		{
			name: "two won, one lost, in fold 0 only",
			questions: func(f int) []cvQuestion {
				var qs []cvQuestion
				if f == 0 {
					qs = append(qs, answerOrQuestion(0, f, true), answerOrQuestion(0, f, true), answerOrQuestion(0, f, false))
				}
				for range 20 {
					qs = append(qs, unchanged(0, f), unchanged(1, f))
				}
				return qs
			},
			plain: []ranking.Params{def, high, high, high, high},
			oneSE: []ranking.Params{def, def, def, def, def},
		},
	}
	for _, tt := range tests {
		var qs []cvQuestion
		for f := range cvFolds {
			qs = append(qs, tt.questions(f)...)
		}
		for _, oneSE := range []bool{false, true} {
			want := tt.plain
			if oneSE {
				want = tt.oneSE
			}
			res := crossValidate(qs, 2, []cvVariant{{name: "answer weight", grid: []ranking.Params{def, high}, forms: stemNone, oneSE: oneSE}}, func(string, ...any) {})
			for f := range cvFolds {
				if got := res[0].folds[0][f].chosen; got != want[f] {
					t.Errorf("%s, one SE %v: fold %d chose %s, want %s", tt.name, oneSE, f, paramsDiff(got), paramsDiff(want[f]))
				}
			}
		}
	}
}
