package enricher_test

import (
	"slices"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEnrichCJKGrammarAndNFC, through the real enrich path with the default
// threshold: a Japanese, Korean or Chinese question whose only overlap with
// an item is grammar (です すか います 예요 的 什么) brings no item, one
// with a content overlap brings its item, a long Japanese message is
// searched for its question, and text in NFD and NFC find each other.
func TestEnrichCJKGrammarAndNFC(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	for _, u := range []struct{ user, lang string }{{"yuki", "ja"}, {"minji", "ko"}, {"mei", "zh"}} {
		if _, err := h.client.SetLanguage(ctx, u.user, u.lang); err != nil {
			t.Fatal(err)
		}
	}
	const (
		osaka    = "大阪に住んでいます"
		dogs     = "犬を二匹飼っています。名前はポチとタマです"
		work     = "仕事はエンジニアをしています"
		coffee   = "毎朝コーヒーを飲んでいます"
		seoul    = "서울에 살아요"
		choco    = "초코는 우리 강아지예요"
		xiaobai  = "我的狗叫小白"
		shanghai = "我住在上海"
		cafe     = "Coffee at the caf\u00e9"                 // NFC
		koln     = "Ko\u0308ln: Mu\u0308ller's Cre\u0302pes" // NFD
	)
	insertContext(t, st,
		store.ContextWrite{UserID: "yuki", Question: osaka, Answer: "いいですね", CreatedAt: t0},
		store.ContextWrite{UserID: "yuki", Question: dogs, Answer: "かわいいですね", CreatedAt: t0},
		store.ContextWrite{UserID: "yuki", Question: work, Answer: "そうですか", CreatedAt: t0},
		store.ContextWrite{UserID: "yuki", Question: coffee, Answer: "いいですね", CreatedAt: t0},
		store.ContextWrite{UserID: "minji", Question: seoul, Answer: "좋아요", CreatedAt: t0},
		store.ContextWrite{UserID: "minji", Question: choco, Answer: "귀여워요", CreatedAt: t0},
		store.ContextWrite{UserID: "mei", Question: xiaobai, Answer: "好可爱的名字", CreatedAt: t0},
		store.ContextWrite{UserID: "mei", Question: shanghai, Answer: "上海是个好地方", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: cafe, Answer: "Nice", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: koln, Answer: "Yum", CreatedAt: t0},
	)
	for _, tt := range []struct {
		user, message string
		want          []string // the questions of the reply's context, in order; nil: none
	}{
		{"yuki", "趣味は何ですか？", nil},
		{"yuki", "どこに住んでいますか？", []string{osaka}},
		{"yuki", "コーヒーは好きですか？", []string{coffee}},
		{"yuki", "最近いろいろと忙しくて、毎日仕事と家事で疲れてしまっているのですが、" +
			"週末も出かける元気がなくて家でゆっくり過ごしているのですけれども、ところで、うちの犬たちの名前を覚えていますか？", []string{dogs}},
		{"minji", "제 취미가 뭐예요?", nil},
		{"minji", "제가 어디에 살아요?", []string{seoul}},
		{"minji", "초코가 누구예요?", []string{choco}},
		{"mei", "我的爱好是什么？", nil},
		{"mei", "我住在哪里？", []string{shanghai}},
		{"mei", "小白是谁？", []string{xiaobai}},
		{"alice", "Which cafe\u0301?", []string{cafe}},           // NFD finds NFC
		{"alice", "Do you know K\u00f6ln?", []string{koln}},      // NFC finds NFD
		{"alice", "M\u00fcller or cr\u00eapes?", []string{koln}}, // NFC finds NFD
	} {
		e := enrich(t, h, events.EnrichRequest{UserID: tt.user, Message: tt.message})
		var got []string
		for _, c := range e.Context {
			got = append(got, c.Question)
		}
		if e.Degraded || !slices.Equal(got, tt.want) {
			t.Errorf("enrich %s %q: context %q (keywords %q), want %q", tt.user, tt.message, got, e.Keywords, tt.want)
		}
	}
}
