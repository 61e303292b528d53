package enricher

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseTimeCJK: Chinese, Japanese and Korean time expressions, read for
// every user (before: their words were searched as keywords, so 昨日 found
// items of any day that said 昨日, and nothing of yesterday's that did not).
func TestParseTimeCJK(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTime(t, at, []parseCase{
		// Days and parts of days.
		{"昨日何を話しましたか？", "2026-11-17", "2026-11-18", "昨日"},
		{"我昨天说了什么？", "2026-11-17", "2026-11-18", "昨天"},
		{"어제 무슨 이야기를 했지?", "2026-11-17", "2026-11-18", "어제"},
		{"今日の会議", "2026-11-18", "2026-11-19", "今日"},
		{"一昨日の話", "2026-11-16", "2026-11-17", "一昨日"},
		{"前天我们去了哪里", "2026-11-16", "2026-11-17", "前天"},
		{"그저께 뭐 먹었지?", "2026-11-16", "2026-11-17", "그저께"},
		{"今朝のミーティング", "2026-11-18", "2026-11-18 12:00", "今朝"},
		{"昨天晚上我们聊了什么", "2026-11-17 18:00", "2026-11-18", "昨天晚上"},
		{"昨日の夜", "2026-11-17 18:00", "2026-11-18 06:00", "昨日の夜"},
		{"어제 저녁에 뭐 먹었지?", "2026-11-17 18:00", "2026-11-18", "어제 저녁"},
		{"昨夜の夢", "2026-11-17 18:00", "2026-11-18 06:00", "昨夜"},
		{"어젯밤에", "2026-11-17 18:00", "2026-11-18 06:00", "어젯밤"},
		// Calendar units: this, last, the one before last.
		{"先週、仕事について何を言いましたか？", "2026-11-09", "2026-11-16", "先週"},
		{"上周我们聊了什么？", "2026-11-09", "2026-11-16", "上周"},
		{"上個星期的事", "2026-11-09", "2026-11-16", "上個星期"},
		{"지난주에 일에 대해 뭐라고 했어?", "2026-11-09", "2026-11-16", "지난주"},
		{"지난 주에 뭐 했지?", "2026-11-09", "2026-11-16", "지난 주"},
		{"先々週の話", "2026-11-02", "2026-11-09", "先々週"},
		{"上上周", "2026-11-02", "2026-11-09", "上上周"},
		{"今月", "2026-11-01", "2026-12-01", "今月"},
		{"先月の旅行", "2026-10-01", "2026-11-01", "先月"},
		{"上个月", "2026-10-01", "2026-11-01", "上个月"},
		{"지난달에", "2026-10-01", "2026-11-01", "지난달"},
		{"去年我提到过哪些旅行？", "2025-01-01", "2026-01-01", "去年"},
		{"昨年の夏", "2025-01-01", "2026-01-01", "昨年"},
		{"작년에 어디 갔지?", "2025-01-01", "2026-01-01", "작년"},
		{"재작년에", "2024-01-01", "2025-01-01", "재작년"},
		{"一昨年の冬", "2024-01-01", "2025-01-01", "一昨年"},
		{"先週末に行った店", "2026-11-14", "2026-11-16", "先週末"},
		{"上周末", "2026-11-14", "2026-11-16", "上周末"},
		{"지난 주말에", "2026-11-14", "2026-11-16", "지난 주말"},
		// A weekday of this or last week.
		{"先週の月曜日に話した本は？", "2026-11-09", "2026-11-10", "先週の月曜日"},
		{"先週金曜", "2026-11-13", "2026-11-14", "先週金曜"},
		{"上周一我说了什么", "2026-11-09", "2026-11-10", "上周一"},
		{"上个星期天我去了哪里", "2026-11-15", "2026-11-16", "上个星期天"},
		{"上周的星期五", "2026-11-13", "2026-11-14", "上周的星期五"},
		{"지난주 월요일에 뭐 했지?", "2026-11-09", "2026-11-10", "지난주 월요일"},
		{"今週の月曜日", "2026-11-16", "2026-11-17", "今週の月曜日"},
		// Korean "last <weekday>": the most recent before today, as
		// English "last Friday" (a review).
		{"지난 금요일에 뭐 했지?", "2026-11-13", "2026-11-14", "지난 금요일"},
		{"지난 수요일", "2026-11-11", "2026-11-12", "지난 수요일"},
		{"저번 월요일에", "2026-11-16", "2026-11-17", "저번 월요일"},
		{"지난 해에", "2025-01-01", "2026-01-01", "지난 해"},
		{"지난 해변", "", "", ""},
		{"한 주 전", "2026-11-09", "2026-11-16", "한 주 전"},
		{"두 주 전에", "2026-11-02", "2026-11-09", "두 주 전"},
		{"前两天我说的", "2026-11-11", "2026-11-17", "前两天"},
		// N units ago, in digits, Han numerals or Korean native numbers.
		{"三日前に話したレシピは何でしたか", "2026-11-15", "2026-11-16", "三日前"},
		{"3日前", "2026-11-15", "2026-11-16", "3日前"},
		{"３日前", "2026-11-15", "2026-11-16", "３日前"},
		{"两周前", "2026-11-02", "2026-11-09", "两周前"},
		{"三个月前", "2026-08-01", "2026-09-01", "三个月前"},
		{"3ヶ月前", "2026-08-01", "2026-09-01", "3ヶ月前"},
		{"十五年前", "2011-01-01", "2012-01-01", "十五年前"},
		{"三天以前", "2026-11-15", "2026-11-16", "三天以前"},
		{"2년 전에 어디로 여행 갔었지?", "2024-01-01", "2025-01-01", "2년 전"},
		{"3일전", "2026-11-15", "2026-11-16", "3일전"},
		{"두 달 전에 뭐 샀지?", "2026-09-01", "2026-10-01", "두 달 전"},
		{"하루 전", "2026-11-17", "2026-11-18", "하루 전"},
		{"일주일 전", "2026-11-09", "2026-11-16", "일주일 전"},
		{"3時間前に話したこと", "2026-11-18 09:30", "2026-11-18 14:00", "3時間前"},
		// A few: 2 to 7 days, 2 to 6 months ..., as "a few ... ago".
		{"数日前", "2026-11-11", "2026-11-17", "数日前"},
		{"几个月前我提到的那本书", "2026-05-01", "2026-10-01", "几个月前"},
		{"며칠 전에 말한 식당", "2026-11-11", "2026-11-17", "며칠 전"},
		{"前几天你推荐的电影", "2026-11-11", "2026-11-17", "前几天"},
		// Years, months and dates.
		{"2024年の目標は何だった？", "2024-01-01", "2025-01-01", "2024年"},
		{"2024年5月に引っ越した", "2024-05-01", "2024-06-01", "2024年5月"},
		{"2024년 5월 3일에", "2024-05-03", "2024-05-04", "2024년 5월 3일"},
		{"去年の5月に何をしましたか", "2025-05-01", "2025-06-01", "去年の5月"},
		{"去年五月", "2025-05-01", "2025-06-01", "去年五月"},
		{"작년 5월에", "2025-05-01", "2025-06-01", "작년 5월"},
		{"5月3日に何を話した？", "2026-05-03", "2026-05-04", "5月3日"},
		{"我的生日是五月三号", "2026-05-03", "2026-05-04", "五月三号"},
		{"12月に何を話した?", "2025-12-01", "2026-01-01", "12月"},
		// Not expressions: another word holding one, a time of something
		// else, a duration, a plan, or one still to come.
		{"오늘날 사람들은", "", "", ""},
		{"지난 주제가 뭐였지?", "", "", ""},
		{"会議の3日前に", "", "", ""},
		{"会议的三天前", "", "", ""},
		{"之前天气很好", "", "", ""},
		{"上周一起吃饭的朋友叫什么", "2026-11-09", "2026-11-16", "上周"},
		{"上个星期三天都在下雨", "2026-11-09", "2026-11-16", "上个星期"},
		{"3ヶ月間ずっと", "", "", ""},
		{"5月に旅行する予定です", "", "", ""},
		{"我打算五月去日本", "", "", ""},
		{"今週末は何をする？", "", "", ""},
		{"今週の金曜日に会いましょう", "", "", ""},
		{"今年の12月", "", "", ""},
		{"2월 30일", "", "", ""},
		{"12345年", "", "", ""},
		{"月曜日に話した", "", "", ""},
		{"明天见", "", "", ""},
		{"東京の天気はどうですか", "", "", ""},
		// The first of either kind.
		{"yesterday, 先週", "2026-11-17", "2026-11-18", "yesterday"},
		{"先週 and yesterday", "2026-11-09", "2026-11-16", "先週"},
	})
}

// TestTimeRestCJK: what a CJK question about a time asks besides it.
// Talk and grammar are not searched within the range (before: を話, 話し,
// 聊了 were, found nothing in it, and the fallback brought back any item
// that said them); a greeting with a time is small talk.
func TestTimeRestCJK(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		msg       string
		asked     []string
		smallTalk bool
	}{
		{"昨日何を話しましたか？", []string{}, false},
		{"昨日は何について話した？", []string{}, false},
		{"上周我们聊了什么？", []string{}, false},
		{"我昨天说了什么？", []string{}, false},
		{"어제 무슨 이야기를 했지?", []string{}, false},
		{"지난주 월요일에 뭐 했지?", []string{}, false},
		{"去年の5月に何をしましたか", []string{}, false},
		{"先週、仕事について何を言いましたか？", []string{"仕事", "事に"}, false},
		{"去年我提到过哪些旅行？", []string{"些旅", "旅行"}, false},
		{"지난주에 일에 대해 뭐라고 했어?", []string{"일에"}, false},
		{"今日はありがとう", []string{}, true},
		{"谢谢你今天的帮助", []string{"的帮", "帮助"}, false},
		{"오늘 고마워요", []string{}, true},
	} {
		e, ok := ParseTime(tt.msg, at)
		if !ok {
			t.Errorf("%q: no time read", tt.msg)
			continue
		}
		asked, _, small := timeRest(tt.msg, e)
		if !slices.Equal(asked, tt.asked) || small != tt.smallTalk {
			t.Errorf("%q: asked %q, small talk %v; want %q, %v", tt.msg, asked, small, tt.asked, tt.smallTalk)
		}
	}
}

// BenchmarkParseTimeCJKLong: 64 KiB messages of CJK text, dates, numerals
// and near misses (each position tries only the expressions starting with
// its rune, so the cost is linear: 2 to 8 ms here).
func BenchmarkParseTimeCJKLong(b *testing.B) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	for _, unit := range []string{"東京でラーメンを食べました。", "3月5日予定", "一二三四五六七八九十", "하루 이틀 사흘 ", "昨日の", "上周一起"} {
		msg := strings.Repeat(unit, 64*1024/len(unit))
		b.Run(unit, func(b *testing.B) {
			for b.Loop() {
				ParseTime(msg, at)
			}
		})
	}
}

// TestParseTimeCJKNearMisses: expressions that read a wrong range (the
// worst: a past range the answer is not in) or were read inside another
// word; each is read right, or not at all.
func TestParseTimeCJKNearMisses(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTime(t, at, []parseCase{
		// Two numerals in a row count roughly (two or three), not 23.
		{"两三天前我说了什么", "", "", ""},
		{"二三日前に言ったこと", "", "", ""},
		{"一两天前提到的那本书", "", "", ""},
		{"三四个月前聊过的电影", "", "", ""},
		{"一百零五天前", "2026-08-05", "2026-08-06", "一百零五天前"},
		// Ten and some days is not a few days.
		{"十几天前我说的那个", "", "", ""},
		{"十数日前", "", "", ""},
		{"好几天前说的", "2026-11-11", "2026-11-17", "几天前"},
		// 大前天: three days back, not the day before yesterday.
		{"大前天我说了什么", "2026-11-15", "2026-11-16", "大前天"},
		{"大前天晚上", "2026-11-15 18:00", "2026-11-16", "大前天晚上"},
		{"さきおとといの話", "2026-11-15", "2026-11-16", "さきおととい"},
		// 一月前, 三月前: a month, three months ago in Japanese; 5월 전:
		// before May.
		{"一月前に話した件", "", "", ""},
		{"三月前に話したこと", "", "", ""},
		{"5월 전에 끝내야 해", "", "", ""},
		{"3月に話した", "2026-03-01", "2026-04-01", "3月"},
		// Hiragana time words inside other words.
		{"べんきょうしたことを教えて", "", "", ""},
		{"きょうだいと話した内容", "", "", ""},
		{"とうきょうに行った話", "", "", ""},
		{"きょうみがあることは何？", "", "", ""},
		{"きのうえに猫がいた", "", "", ""},
		{"ところできょうは何を話した？", "2026-11-18", "2026-11-19", "きょう"},
		{"きのうの話", "2026-11-17", "2026-11-18", "きのう"},
		// 上 and 本 ending another word.
		{"晚上周末都有空", "", "", ""},
		{"马上周末了", "", "", ""},
		{"路上周围有什么", "", "", ""},
		{"在日本月薪多少", "", "", ""},
		{"日本周边游推荐", "", "", ""},
		{"基本月薪是多少", "", "", ""},
		{"我上周末去了哪里", "2026-11-14", "2026-11-16", "上周末"},
		{"我们本周三讨论了什么", "2026-11-18", "2026-11-19", "本周三"},
		// A numeral after the week that counts something: the week, not
		// a day of it.
		{"上周二手车的价格", "2026-11-09", "2026-11-16", "上周"},
		{"上周一本书都没看", "2026-11-09", "2026-11-16", "上周"},
		{"上周三场比赛", "2026-11-09", "2026-11-16", "上周"},
		{"上周日本首相说了什么", "2026-11-09", "2026-11-16", "上周"},
		{"上周日我们聊了什么", "2026-11-15", "2026-11-16", "上周日"},
		// Korean plans: 할 거 is a phrase (not 할 in 할머니, nor 거 in 말한
		// 거); 할까 asks what to do.
		{"5월에 말한 거 뭐였지?", "2026-05-01", "2026-06-01", "5월"},
		{"5월에 할머니 댁에 갔지?", "2026-05-01", "2026-06-01", "5월"},
		{"5월에 제주도 갈 거야", "", "", ""},
		{"12월 25일에 뭐 할까?", "", "", ""},
	})
}

// TestTimeRestCJKTalk: talk and part-of-month words that stayed searched
// in a question about the time alone (the range search then found nothing,
// and the fallback searched all time), and thanks that were not small talk.
func TestTimeRestCJKTalk(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		msg       string
		asked     []string
		smallTalk bool
	}{
		{"今朝何を言ったか覚えてる？", []string{}, false},
		{"昨日の午後に話したことをまとめて", []string{}, false},
		{"30分前に何て言った？", []string{}, false},
		{"去年の今頃は何をしていた？", []string{}, false},
		{"3月末に話したこと", []string{}, false},
		{"昨天下午聊了啥", []string{}, false},
		{"上个月底说了什么", []string{}, false},
		{"去年底我说了什么", []string{}, false},
		{"일주일 전에 말한 거", []string{}, false},
		{"어제 오후에 얘기한 거", []string{}, false},
		{"저번 주에 말한 식당", []string{"식당"}, false},
		{"昨日はありがとうございました", []string{}, true},
		{"어제는 고마웠어", []string{}, true},
	} {
		e, ok := ParseTime(tt.msg, at)
		if !ok {
			t.Errorf("%q: no time read", tt.msg)
			continue
		}
		asked, _, small := timeRest(tt.msg, e)
		if !slices.Equal(asked, tt.asked) || small != tt.smallTalk {
			t.Errorf("%q: asked %q, small talk %v; want %q, %v", tt.msg, asked, small, tt.asked, tt.smallTalk)
		}
	}
}
