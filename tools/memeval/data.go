package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// unit is one turn event: what a frontend publishes and what the baselines
// index (the user message and the reply to it).
type unit struct {
	eventID string
	user    string // user_message
	reply   string // assistant_response
	at      time.Time
}

// text is the unit as the baselines index it: the same words memoryd's
// offline extractor stores (question, then answer).
func (u unit) text() string { return u.user + "\n" + u.reply }

// question is one evaluated question of a haystack.
type question struct {
	id       string // LongMemEval question_id; "" for LoCoMo
	text     string
	answer   string // the expected answer (LongMemEval); "" for LoCoMo
	at       time.Time
	category string
	evidence map[string]bool // event ids holding an evidence turn
	// latest are the evidence events of the last session holding
	// evidence, older those of earlier sessions (LongMemEval): in a
	// knowledge-update question, where the latest value and the value it
	// superseded were stated.
	latest, older map[string]bool
}

// haystack is one memoryd user: a LoCoMo conversation or a LongMemEval
// question's sessions.
type haystack struct {
	dataset   string
	name      string
	units     []unit
	questions []question
}

// loadStats counts what a loader skipped, for the report.
type loadStats struct {
	questions, skippedCategory, skippedAbstention, skippedNoEvidence int
	droppedTurns                                                     int // turns no frontend could publish (blank user message, orphan reply)
}

// turnStep is the spacing of the events of one session: the session's date,
// then one minute per turn event, so that the order of a session's turns is
// kept (and ties in recency are broken by it).
const turnStep = time.Minute

func readGzipJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoCoMo (snap-research/LoCoMo).

type locomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
}

type locomoQA struct {
	Question string            `json:"question"`
	Evidence []json.RawMessage `json:"evidence"`
	Category int               `json:"category"`
}

type locomoSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []locomoQA                 `json:"qa"`
}

var (
	locomoSessionKey = regexp.MustCompile(`^session_(\d+)$`)
	locomoCategories = map[int]string{1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}
)

// locomoDate parses "1:56 pm on 8 May, 2023".
func locomoDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"3:04 pm on 2 January, 2006", "3:04 pm on 2 Jan, 2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("locomo: unparsable session date %q", s)
}

// loadLoCoMo turns each conversation into a haystack: consecutive turn pairs
// of a session are one event (first speaker as user_message, the next as
// assistant_response; a trailing odd turn has an empty reply). Questions are
// asked a day after the last session. Category 5 (adversarial) and questions
// whose evidence resolves to no turn are skipped.
func loadLoCoMo(path, run string) ([]haystack, loadStats, error) {
	var samples []locomoSample
	var st loadStats
	if err := readGzipJSON(path, &samples); err != nil {
		return nil, st, err
	}
	var out []haystack
	for _, s := range samples {
		h := haystack{dataset: "locomo", name: s.SampleID}
		type session struct {
			n     int
			turns []locomoTurn
		}
		var sessions []session
		for k, raw := range s.Conversation {
			m := locomoSessionKey.FindStringSubmatch(k)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			var turns []locomoTurn
			if err := json.Unmarshal(raw, &turns); err != nil {
				return nil, st, fmt.Errorf("locomo %s %s: %w", s.SampleID, k, err)
			}
			sessions = append(sessions, session{n, turns})
		}
		sort.Slice(sessions, func(i, j int) bool { return sessions[i].n < sessions[j].n })
		eventOf := map[string]string{} // dia_id -> event id
		var last time.Time
		for _, ss := range sessions {
			var dateStr string
			if raw, ok := s.Conversation[fmt.Sprintf("session_%d_date_time", ss.n)]; ok {
				_ = json.Unmarshal(raw, &dateStr)
			}
			date, err := locomoDate(dateStr)
			if err != nil {
				return nil, st, fmt.Errorf("locomo %s session %d: %w", s.SampleID, ss.n, err)
			}
			for i := 0; i < len(ss.turns); i += 2 {
				first := ss.turns[i]
				ids := []string{first.DiaID}
				reply := ""
				if i+1 < len(ss.turns) {
					reply = ss.turns[i+1].Text
					ids = append(ids, ss.turns[i+1].DiaID)
				}
				if strings.TrimSpace(first.Text) == "" {
					st.droppedTurns += len(ids)
					continue
				}
				u := unit{
					eventID: fmt.Sprintf("%s-%s-%s", run, s.SampleID, strings.Join(ids, "+")),
					user:    first.Text,
					reply:   reply,
					at:      date.Add(time.Duration(i/2) * turnStep),
				}
				if u.at.After(last) {
					last = u.at
				}
				for _, id := range ids {
					eventOf[id] = u.eventID
				}
				h.units = append(h.units, u)
			}
		}
		at := last.Add(24 * time.Hour)
		for _, qa := range s.QA {
			if qa.Category == 5 {
				st.skippedCategory++
				continue
			}
			ev := map[string]bool{}
			for _, raw := range qa.Evidence {
				var e string
				if json.Unmarshal(raw, &e) != nil {
					continue
				}
				for _, id := range strings.FieldsFunc(e, func(r rune) bool { return r == ';' || r == ',' }) {
					if eid, ok := eventOf[strings.TrimSpace(id)]; ok {
						ev[eid] = true
					}
				}
			}
			if len(ev) == 0 {
				st.skippedNoEvidence++
				continue
			}
			cat, ok := locomoCategories[qa.Category]
			if !ok {
				cat = strconv.Itoa(qa.Category)
			}
			h.questions = append(h.questions, question{text: qa.Question, at: at, category: cat, evidence: ev})
			st.questions++
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, st, nil
}

// LongMemEval (xiaowu0162/LongMemEval).

type lmeTurn struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	HasAnswer bool   `json:"has_answer"`
}

type lmeItem struct {
	QuestionID        string      `json:"question_id"`
	QuestionType      string      `json:"question_type"`
	Question          string      `json:"question"`
	Answer            any         `json:"answer"`
	QuestionDate      string      `json:"question_date"`
	HaystackDates     []string    `json:"haystack_dates"`
	HaystackSessions  [][]lmeTurn `json:"haystack_sessions"`
	HaystackSessionID []string    `json:"haystack_session_ids"`
}

// lmeDate parses "2023/05/30 (Tue) 23:40".
func lmeDate(s string) (time.Time, error) {
	t, err := time.Parse("2006/01/02 (Mon) 15:04", strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("longmemeval: unparsable date %q", s)
	}
	return t, nil
}

// loadLongMemEval turns each question into a haystack of its own: each user
// message with the assistant reply that follows it is one event, timestamped
// with its session's date. Evidence is the events holding a turn with
// has_answer. Abstention questions (_abs) and questions without evidence are
// skipped.
func loadLongMemEval(path, run string) ([]haystack, loadStats, error) {
	var items []lmeItem
	var st loadStats
	if err := readGzipJSON(path, &items); err != nil {
		return nil, st, err
	}
	var out []haystack
	for qi, it := range items {
		if strings.HasSuffix(it.QuestionID, "_abs") {
			st.skippedAbstention++
			continue
		}
		if len(it.HaystackDates) != len(it.HaystackSessions) {
			return nil, st, fmt.Errorf("longmemeval %s: %d dates for %d sessions", it.QuestionID, len(it.HaystackDates), len(it.HaystackSessions))
		}
		h := haystack{dataset: "longmemeval", name: it.QuestionID}
		ev := map[string]bool{}
		evSession := map[string]int{} // evidence event -> its session's index
		for si, sess := range it.HaystackSessions {
			date, err := lmeDate(it.HaystackDates[si])
			if err != nil {
				return nil, st, fmt.Errorf("longmemeval %s: %w", it.QuestionID, err)
			}
			n := 0
			for ti := 0; ti < len(sess); ti++ {
				t := sess[ti]
				if t.Role != "user" || strings.TrimSpace(t.Content) == "" {
					st.droppedTurns++ // an assistant turn with no user message before it
					continue
				}
				u := unit{
					eventID: fmt.Sprintf("%s-lme%d-s%d-t%d", run, qi, si, ti),
					user:    t.Content,
					at:      date.Add(time.Duration(n) * turnStep),
				}
				hasAnswer := t.HasAnswer
				if ti+1 < len(sess) && sess[ti+1].Role == "assistant" {
					ti++
					u.reply = sess[ti].Content
					hasAnswer = hasAnswer || sess[ti].HasAnswer
				}
				if hasAnswer {
					ev[u.eventID] = true
					evSession[u.eventID] = si
				}
				h.units = append(h.units, u)
				n++
			}
		}
		if len(ev) == 0 {
			st.skippedNoEvidence++
			continue
		}
		at, err := lmeDate(it.QuestionDate)
		if err != nil {
			return nil, st, fmt.Errorf("longmemeval %s: %w", it.QuestionID, err)
		}
		latest, older := splitLatest(evSession, it.HaystackDates)
		h.questions = []question{{
			id: it.QuestionID, text: it.Question, answer: fmt.Sprint(it.Answer), at: at, category: it.QuestionType,
			evidence: ev, latest: latest, older: older,
		}}
		st.questions++
		out = append(out, h)
	}
	return out, st, nil
}

// splitLatest splits evidence events (event id -> session index) into those
// of the latest-dated session holding evidence and those of the others.
// dates are the sessions' dates as LongMemEval writes them, which sort as
// strings ("2023/05/30 (Tue) 23:40"); equal dates go by session index.
func splitLatest(evSession map[string]int, dates []string) (latest, older map[string]bool) {
	last := -1
	for _, si := range evSession {
		if last < 0 || dates[si] > dates[last] || (dates[si] == dates[last] && si > last) {
			last = si
		}
	}
	latest, older = map[string]bool{}, map[string]bool{}
	for id, si := range evSession {
		if si == last {
			latest[id] = true
		} else {
			older[id] = true
		}
	}
	return latest, older
}
