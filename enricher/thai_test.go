package enricher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// thaiTurns are a Thai user's turns as a Thai speaker types them: phrases
// between spaces, English names and numbers inside.
var thaiTurns = [][2]string{
	{"สวัสดีครับ ผมชื่อต้น ทำงานเป็น software engineer ที่ Agoda มา 3 ปีแล้วครับ", "ยินดีที่ได้รู้จักครับคุณต้น"},
	{"แฟนผมชื่อแพรว เธอเป็นพยาบาลอยู่โรงพยาบาลรามาธิบดี ทำกะดึกบ่อยมาก", "งานพยาบาลเหนื่อยมากเลยครับ"},
	{"ผมเลี้ยงแมวสองตัว ชื่อส้มกับถั่ว ส้มเป็นแมวส้ม ส่วนถั่วเป็นแมววิเชียรมาศ", "น่ารักมากครับ"},
	{"เดือนหน้าผมจะไปญี่ปุ่น บินวันที่ 12 มีนาคม ไฟลท์ TG 676 ไปโตเกียว กลับวันที่ 20", "เที่ยวให้สนุกนะครับ"},
	{"ผมแพ้ถั่วลิสงนะครับ กินแล้วหายใจไม่ออก ต้องพก EpiPen ตลอด", "รับทราบครับ จะระวังให้"},
	{"คอนโดผมอยู่แถวอารีย์ ใกล้ BTS สถานีอารีย์ ค่าเช่าเดือนละ 18,000 บาท", "ทำเลดีครับ"},
	{"ช่วงนี้ผมกำลังซ้อมวิ่ง เตรียมลงฮาล์ฟมาราธอนที่บางแสนเดือนพฤษภาคม", "สู้ๆ ครับ"},
	{"แม่ผมเป็นเบาหวาน ต้องฉีดอินซูลินทุกเช้า ผมเลยต้องพาไปหาหมอที่ศิริราชทุกเดือน", "ดูแลคุณแม่ดีๆ นะครับ"},
	{"ผมอยากเปลี่ยนรถ กำลังดู Honda Civic กับ Mazda 3 งบไม่เกิน 1 ล้านบาท", "ทั้งสองรุ่นน่าสนใจครับ"},
	{"วันเกิดแพรวคือ 5 กรกฎาคม ผมอยากเซอร์ไพรส์ด้วยการพาไปกินโอมากาเสะ", "ไอเดียดีมากครับ"},
	{"ผมกำลังเรียนภาษาเยอรมันออนไลน์ ทุกวันอังคารกับพฤหัส ตอนสองทุ่ม", "เก่งมากครับ"},
	{"ผมเล่นกีตาร์ในวงดนตรีกับเพื่อนสมัยมหาลัย เราซ้อมกันที่สตูดิโอแถวลาดพร้าว", "เจ๋งมากครับ"},
}

// TestThaiQuestions: a Thai user's questions about their turns find the
// turn first, and questions about nothing they said inject nothing at the
// default threshold, nor do thanks. Each bigram of a Thai sentence ORed
// made almost every unrelated question inject three turns at 0.36-0.88 (a
// walk: 10 of 10); searched by trigrams without function words, 3 of 12
// here.
func TestThaiQuestions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i, tr := range thaiTurns {
		insertContext(t, st, store.ContextWrite{UserID: "ton", Question: tr[0], Answer: tr[1], CreatedAt: at.Add(time.Duration(i) * time.Hour)})
	}
	related := []struct {
		message string
		turn    int
	}{
		{"แฟนผมทำงานที่ไหนนะ", 1}, {"แมวของผมชื่ออะไรบ้าง", 2}, {"ผมจะบินไปโตเกียววันไหน", 3},
		{"ผมแพ้อะไร", 4}, {"ผมพักอยู่ย่านไหน", 5}, {"ค่าเช่าคอนโดเท่าไหร่", 5},
		{"งานวิ่งที่ผมจะลงจัดที่ไหน", 6}, {"แม่ต้องไปหาหมอบ่อยแค่ไหน", 7}, {"ผมกำลังดูรถรุ่นอะไรอยู่", 8},
		{"วันเกิดแฟนผมวันที่เท่าไหร่", 9}, {"เรียนภาษาเยอรมันวันไหนบ้าง", 10}, {"วงดนตรีซ้อมที่ไหน", 11},
		{"TG 676 กี่โมง", 3}, {"EpiPen", 4}, {"ผมทำงานที่ Agoda กี่ปีแล้ว", 0},
		{"แมว ชื่อ อะไร", 2}, {"ไฟลท์ไปญี่ปุ่น", 3}, {"ซื้อรถ Civic ดีไหม", 8},
		{"คุณจำได้ไหมว่าผมแพ้อาหารอะไร ช่วยเช็คเมนูนี้ให้หน่อย ผัดไทยใส่ถั่ว", 4},
		{"เมื่อกี้ผมบอกไปว่าแม่ผมป่วยเป็นโรคอะไรนะครับ", 7},
	}
	unrelated := []string{
		"ช่วยแนะนำสูตรต้มยำกุ้งหน่อยครับ", "พรุ่งนี้ฝนจะตกไหมครับ", "หุ้นตัวไหนน่าลงทุนในปีนี้ครับ",
		"วิธีทำความสะอาดเครื่องซักผ้าทำยังไงครับ", "ฟุตบอลโลกครั้งหน้าจัดที่ประเทศอะไร", "ช่วยเขียนกลอนเกี่ยวกับทะเลให้หน่อยครับ",
		"ปลูกต้นมะม่วงต้องรดน้ำบ่อยแค่ไหน", "อธิบายเรื่องหลุมดำให้ฟังหน่อยครับ", "ราคาทองวันนี้เท่าไหร่ครับ",
		"ควรซื้อโน้ตบุ๊กรุ่นไหนดีสำหรับนักศึกษา", "ขอบคุณครับ", "โอเคครับ",
	}
	first := 0
	for _, q := range related {
		r := enrich(t, h, events.EnrichRequest{UserID: "ton", Message: q.message, At: at.Add(24 * time.Hour)})
		if len(r.Context) > 0 && r.Context[0].Question == thaiTurns[q.turn][0] {
			first++
		} else {
			t.Logf("%q: %s", q.message, summary(r))
		}
	}
	injected := 0
	for _, q := range unrelated {
		r := enrich(t, h, events.EnrichRequest{UserID: "ton", Message: q, At: at.Add(24 * time.Hour)})
		if len(r.Context) > 0 {
			injected++
			t.Logf("unrelated %q injected %s", q, summary(r))
		}
	}
	t.Logf("figures: %d of %d related questions find their turn first; %d of %d unrelated inject", first, len(related), injected, len(unrelated))
	// The unrelated ones that inject share a word with a turn ("หน้า",
	// next; "บ่อย", often), as "next" does in English, or one chance
	// trigram across words.
	if first < 16 || injected > 3 {
		t.Errorf("%d of %d related questions find their turn first (want at least 16), %d of %d unrelated inject (want at most 3)",
			first, len(related), injected, len(unrelated))
	}
}

func summary(r events.EnrichReply) string {
	s := fmt.Sprintf("keywords %q:", r.Keywords)
	for _, c := range r.Context {
		s += fmt.Sprintf(" [%.3f %.20s]", c.Score, c.Question)
	}
	return s
}
