package enricher

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseTimeEuropean: German, French, Spanish, Italian, Portuguese,
// Dutch, Russian and Polish time expressions, read for every user (before: their words were
// searched as keywords across all time, so "Was habe ich letzte Woche
// gesagt?" found items that said "Woche", of any week).
func TestParseTimeEuropean(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		// German.
		{"Was habe ich gestern gesagt?", "2026-11-17", "2026-11-18", "gestern"},
		{"Worüber haben wir heute gesprochen?", "2026-11-18", "2026-11-19", "heute"},
		{"vorgestern beim Arzt", "2026-11-16", "2026-11-17", "vorgestern"},
		{"Was habe ich heute Morgen gegessen?", "2026-11-18", "2026-11-18 12:00", "heute Morgen"},
		{"Worüber haben wir gestern Abend gesprochen?", "2026-11-17 18:00", "2026-11-18", "gestern Abend"},
		{"Was war letzte Nacht los?", "2026-11-17 18:00", "2026-11-18 06:00", "letzte Nacht"},
		{"Was habe ich letzte Woche gesagt?", "2026-11-09", "2026-11-16", "letzte Woche"},
		{"in der vergangenen Woche", "2026-11-09", "2026-11-16", "vergangenen Woche"},
		{"diese Woche", "2026-11-16", "2026-11-23", "diese Woche"},
		{"vorletzte Woche", "2026-11-02", "2026-11-09", "vorletzte Woche"},
		{"letzten Monat", "2026-10-01", "2026-11-01", "letzten Monat"},
		{"im letzten Jahr", "2025-01-01", "2026-01-01", "letzten Jahr"},
		{"letztes Wochenende", "2026-11-14", "2026-11-16", "letztes Wochenende"},
		{"vor drei Tagen", "2026-11-15", "2026-11-16", "vor drei Tagen"},
		{"vor 2 Wochen", "2026-11-02", "2026-11-09", "vor 2 Wochen"},
		{"vor einem Jahr", "2025-01-01", "2026-01-01", "vor einem Jahr"},
		{"vor ein paar Tagen", "2026-11-11", "2026-11-17", "vor ein paar Tagen"},
		{"vor zwei Stunden", "2026-11-18 11:30", "2026-11-18 14:30", "vor zwei Stunden"},
		{"letzten Freitag", "2026-11-13", "2026-11-14", "letzten Freitag"},
		{"am letzten Montag", "2026-11-16", "2026-11-17", "letzten Montag"},
		{"Montag letzter Woche", "2026-11-09", "2026-11-10", "Montag letzter Woche"},
		{"letzte Woche am Freitag", "2026-11-13", "2026-11-14", "letzte Woche am Freitag"},
		{"Was war im Mai?", "2026-05-01", "2026-06-01", "im Mai"},
		{"im Dezember", "2025-12-01", "2026-01-01", "im Dezember"},
		{"im März 2024", "2024-03-01", "2024-04-01", "im März 2024"},
		{"am 3. Mai", "2026-05-03", "2026-05-04", "3. Mai"},
		{"am 20. November", "2025-11-20", "2025-11-21", "20. November"},
		{"im Jahr 2023", "2023-01-01", "2024-01-01", "im Jahr 2023"},
		// French.
		{"Qu'est-ce que j'ai dit hier ?", "2026-11-17", "2026-11-18", "hier"},
		{"De quoi avons-nous parlé aujourd'hui ?", "2026-11-18", "2026-11-19", "aujourd'hui"},
		{"avant-hier", "2026-11-16", "2026-11-17", "avant-hier"},
		{"hier soir", "2026-11-17 18:00", "2026-11-18 06:00", "hier soir"},
		{"ce matin", "2026-11-18", "2026-11-18 12:00", "ce matin"},
		{"la semaine dernière", "2026-11-09", "2026-11-16", "la semaine dernière"},
		{"le mois dernier", "2026-10-01", "2026-11-01", "le mois dernier"},
		{"l'année dernière", "2025-01-01", "2026-01-01", "l'année dernière"},
		{"l’an passé", "2025-01-01", "2026-01-01", "l’an passé"},
		{"le week-end dernier", "2026-11-14", "2026-11-16", "le week-end dernier"},
		{"il y a trois jours", "2026-11-15", "2026-11-16", "il y a trois jours"},
		{"il y a quelques semaines", "2026-10-19", "2026-11-09", "il y a quelques semaines"},
		{"vendredi dernier", "2026-11-13", "2026-11-14", "vendredi dernier"},
		{"lundi de la semaine dernière", "2026-11-09", "2026-11-10", "lundi de la semaine dernière"},
		{"en mai 2024", "2024-05-01", "2024-06-01", "en mai 2024"},
		{"le 1er mai", "2026-05-01", "2026-05-02", "1er mai"},
		// Spanish.
		{"¿Qué dije ayer?", "2026-11-17", "2026-11-18", "ayer"},
		{"¿De qué hablamos hoy?", "2026-11-18", "2026-11-19", "hoy"},
		{"anteayer", "2026-11-16", "2026-11-17", "anteayer"},
		{"anoche", "2026-11-17 18:00", "2026-11-18 06:00", "anoche"},
		{"esta mañana", "2026-11-18", "2026-11-18 12:00", "esta mañana"},
		{"la semana pasada", "2026-11-09", "2026-11-16", "la semana pasada"},
		{"el mes pasado", "2026-10-01", "2026-11-01", "el mes pasado"},
		{"el año pasado", "2025-01-01", "2026-01-01", "el año pasado"},
		{"el fin de semana pasado", "2026-11-14", "2026-11-16", "el fin de semana pasado"},
		{"hace tres semanas", "2026-10-26", "2026-11-02", "hace tres semanas"},
		{"hace unos días", "2026-11-11", "2026-11-17", "hace unos días"},
		{"hace un par de días", "2026-11-16", "2026-11-17", "hace un par de días"},
		{"el lunes pasado", "2026-11-16", "2026-11-17", "el lunes pasado"},
		{"el lunes de la semana pasada", "2026-11-09", "2026-11-10", "lunes de la semana pasada"},
		{"en mayo de 2024", "2024-05-01", "2024-06-01", "en mayo de 2024"},
		{"el 3 de mayo", "2026-05-03", "2026-05-04", "3 de mayo"},
		// Italian.
		{"Cosa ho detto ieri?", "2026-11-17", "2026-11-18", "ieri"},
		{"oggi", "2026-11-18", "2026-11-19", "oggi"},
		{"l'altro ieri", "2026-11-16", "2026-11-17", "l'altro ieri"},
		{"ieri sera", "2026-11-17 18:00", "2026-11-18", "ieri sera"},
		{"stamattina", "2026-11-18", "2026-11-18 12:00", "stamattina"},
		{"la settimana scorsa", "2026-11-09", "2026-11-16", "la settimana scorsa"},
		{"il mese scorso", "2026-10-01", "2026-11-01", "il mese scorso"},
		{"quest'anno", "2026-01-01", "2027-01-01", "quest'anno"},
		{"l'anno scorso", "2025-01-01", "2026-01-01", "l'anno scorso"},
		{"tre giorni fa", "2026-11-15", "2026-11-16", "tre giorni fa"},
		{"qualche giorno fa", "2026-11-11", "2026-11-17", "qualche giorno fa"},
		{"venerdì scorso", "2026-11-13", "2026-11-14", "venerdì scorso"},
		{"a maggio", "2026-05-01", "2026-06-01", "a maggio"},
		// Portuguese.
		{"O que eu disse ontem?", "2026-11-17", "2026-11-18", "ontem"},
		{"hoje", "2026-11-18", "2026-11-19", "hoje"},
		{"anteontem", "2026-11-16", "2026-11-17", "anteontem"},
		{"ontem à noite", "2026-11-17 18:00", "2026-11-18 06:00", "ontem à noite"},
		{"na semana passada", "2026-11-09", "2026-11-16", "semana passada"},
		{"o mês passado", "2026-10-01", "2026-11-01", "o mês passado"},
		{"no ano passado", "2025-01-01", "2026-01-01", "ano passado"},
		{"há duas semanas", "2026-11-02", "2026-11-09", "há duas semanas"},
		{"3 dias atrás", "2026-11-15", "2026-11-16", "3 dias atrás"},
		{"faz alguns meses", "2026-05-01", "2026-10-01", "faz alguns meses"},
		{"na segunda-feira passada", "2026-11-16", "2026-11-17", "segunda-feira passada"},
		{"no fim de semana passado", "2026-11-14", "2026-11-16", "fim de semana passado"},
		{"em maio de 2024", "2024-05-01", "2024-06-01", "em maio de 2024"},
		// Dutch.
		{"Wat zei ik gisteren?", "2026-11-17", "2026-11-18", "gisteren"},
		{"vandaag", "2026-11-18", "2026-11-19", "vandaag"},
		{"eergisteren", "2026-11-16", "2026-11-17", "eergisteren"},
		{"gisteravond", "2026-11-17 18:00", "2026-11-18", "gisteravond"},
		{"vorige week", "2026-11-09", "2026-11-16", "vorige week"},
		{"vorige maand", "2026-10-01", "2026-11-01", "vorige maand"},
		{"vorig jaar", "2025-01-01", "2026-01-01", "vorig jaar"},
		{"twee weken geleden", "2026-11-02", "2026-11-09", "twee weken geleden"},
		{"een paar dagen geleden", "2026-11-11", "2026-11-17", "een paar dagen geleden"},
		{"afgelopen maandag", "2026-11-16", "2026-11-17", "afgelopen maandag"},
		{"in mei", "2026-05-01", "2026-06-01", "in mei"},
		// The rest of protocol.md's table.
		{"lunedì della settimana scorsa", "2026-11-09", "2026-11-10", "lunedì della settimana scorsa"},
		{"segunda da semana passada", "2026-11-09", "2026-11-10", "segunda da semana passada"},
		{"maandag van vorige week", "2026-11-09", "2026-11-10", "maandag van vorige week"},
		{"il 3 maggio", "2026-05-03", "2026-05-04", "3 maggio"},
		{"maggio 2024", "2024-05-01", "2024-06-01", "maggio 2024"},
		{"3 mei", "2026-05-03", "2026-05-04", "3 mei"},
		{"mei 2024", "2024-05-01", "2024-06-01", "mei 2024"},
		{"maio de 2024", "2024-05-01", "2024-06-01", "maio de 2024"},
		{"l'an dernier", "2025-01-01", "2026-01-01", "l'an dernier"},
		{"ce mois-ci", "2026-11-01", "2026-12-01", "ce mois-ci"},
		{"el finde pasado", "2026-11-14", "2026-11-16", "el finde pasado"},
		{"un paio di giorni fa", "2026-11-16", "2026-11-17", "un paio di giorni fa"},
		{"faz três dias", "2026-11-15", "2026-11-16", "faz três dias"},
		{"lo scorso lunedì", "2026-11-16", "2026-11-17", "lo scorso lunedì"},
		{"em 2024", "2024-01-01", "2025-01-01", "em 2024"},
		{"nel 2024", "2024-01-01", "2025-01-01", "nel 2024"},
		{"en 2024", "2024-01-01", "2025-01-01", "en 2024"},
		{"hoje de manhã", "2026-11-18", "2026-11-18 12:00", "hoje de manhã"},
		{"gisternacht", "2026-11-17 18:00", "2026-11-18 06:00", "gisternacht"},
		{"el año antepasado", "2024-01-01", "2025-01-01", "el año antepasado"},
		{"vorletztes Jahr", "2024-01-01", "2025-01-01", "vorletztes Jahr"},
		{"el día 3 de mayo", "2026-05-03", "2026-05-04", "día 3 de mayo"},
		{"1º de maio", "2026-05-01", "2026-05-02", "1º de maio"},
		{"no dia 3 de maio", "2026-05-03", "2026-05-04", "dia 3 de maio"},
		{"ad aprile", "2026-04-01", "2026-05-01", "ad aprile"},
		{"essa semana", "2026-11-16", "2026-11-23", "essa semana"},
		{"o mês retrasado", "2026-09-01", "2026-10-01", "o mês retrasado"},
		{"avant-hier soir", "2026-11-16 18:00", "2026-11-17 06:00", "avant-hier soir"},
		// The last N units, or the last few, to the end of at's day.
		{"Worüber haben wir in den letzten Tagen gesprochen?", "2026-11-11", "2026-11-19", "den letzten Tagen"},
		{"in den letzten drei Wochen", "2026-10-28", "2026-11-19", "den letzten drei Wochen"},
		{"die letzten Stunden", "2026-11-18 08:30", "2026-11-19", "die letzten Stunden"},
		{"ces derniers jours", "2026-11-11", "2026-11-19", "ces derniers jours"},
		{"ces derniers mois", "2026-05-18", "2026-11-19", "ces derniers mois"},
		{"au cours des trois dernières semaines", "2026-10-28", "2026-11-19", "des trois dernières semaines"},
		{"en los últimos días", "2026-11-11", "2026-11-19", "los últimos días"},
		{"las últimas dos semanas", "2026-11-04", "2026-11-19", "las últimas dos semanas"},
		{"negli ultimi giorni", "2026-11-11", "2026-11-19", "negli ultimi giorni"},
		{"nos últimos dias", "2026-11-11", "2026-11-19", "nos últimos dias"},
		{"de afgelopen dagen", "2026-11-11", "2026-11-19", "de afgelopen dagen"},
		{"de afgelopen week", "2026-11-11", "2026-11-19", "de afgelopen week"},
		// A weekday alone, in a sentence about the past: the most recent
		// before today (at is a Wednesday: today is "heute").
		{"Was habe ich am Montag gesagt?", "2026-11-16", "2026-11-17", "Montag"},
		{"Was war am Mittwoch?", "2026-11-11", "2026-11-12", "Mittwoch"},
		{"De quoi avons-nous parlé vendredi ?", "2026-11-13", "2026-11-14", "vendredi"},
		{"¿Qué dije el lunes?", "2026-11-16", "2026-11-17", "lunes"},
		{"Cosa ho detto sabato?", "2026-11-14", "2026-11-15", "sabato"},
		{"O que eu disse na segunda?", "2026-11-16", "2026-11-17", "segunda"},
		{"Wat zei ik maandag?", "2026-11-16", "2026-11-17", "maandag"},
		// With its part of the day, which is no word to search for.
		{"Worüber haben wir Dienstag Abend gesprochen?", "2026-11-17 18:00", "2026-11-18", "Dienstag Abend"},
		{"Je t'ai parlé mardi soir", "2026-11-17 18:00", "2026-11-18", "mardi soir"},
		{"Lunedì sera cosa abbiamo detto?", "2026-11-16 18:00", "2026-11-17", "Lunedì sera"},
		{"Nestes últimos dias estive doente", "2026-11-11", "2026-11-19", "Nestes últimos dias"},
		// Russian.
		{"Что я сказал вчера?", "2026-11-17", "2026-11-18", "вчера"},
		{"О чём мы говорили сегодня утром?", "2026-11-18", "2026-11-18 12:00", "сегодня утром"},
		{"позавчера", "2026-11-16", "2026-11-17", "позавчера"},
		{"вчера вечером", "2026-11-17 18:00", "2026-11-18", "вчера вечером"},
		{"Что я говорил на прошлой неделе?", "2026-11-09", "2026-11-16", "на прошлой неделе"},
		{"в прошлом месяце", "2026-10-01", "2026-11-01", "в прошлом месяце"},
		{"в прошлом году", "2025-01-01", "2026-01-01", "в прошлом году"},
		{"в прошлые выходные", "2026-11-14", "2026-11-16", "в прошлые выходные"},
		{"три дня назад", "2026-11-15", "2026-11-16", "три дня назад"},
		{"2 недели назад", "2026-11-02", "2026-11-09", "2 недели назад"},
		{"неделю назад", "2026-11-09", "2026-11-16", "неделю назад"},
		{"пару дней назад", "2026-11-16", "2026-11-17", "пару дней назад"},
		{"несколько дней назад", "2026-11-11", "2026-11-17", "несколько дней назад"},
		{"в прошлую пятницу", "2026-11-13", "2026-11-14", "в прошлую пятницу"},
		{"Что я сказал в понедельник?", "2026-11-16", "2026-11-17", "понедельник"},
		{"в мае", "2026-05-01", "2026-06-01", "в мае"},
		{"3 мая", "2026-05-03", "2026-05-04", "3 мая"},
		{"в 2024 году", "2024-01-01", "2025-01-01", "в 2024"},
		{"за последние три дня", "2026-11-15", "2026-11-19", "последние три дня"},
		{"в последние дни", "2026-11-11", "2026-11-19", "последние дни"},
		// Polish.
		{"Co powiedziałem wczoraj?", "2026-11-17", "2026-11-18", "wczoraj"},
		{"dzisiaj", "2026-11-18", "2026-11-19", "dzisiaj"},
		{"przedwczoraj", "2026-11-16", "2026-11-17", "przedwczoraj"},
		{"wczoraj wieczorem", "2026-11-17 18:00", "2026-11-18", "wczoraj wieczorem"},
		{"O czym rozmawialiśmy w zeszłym tygodniu?", "2026-11-09", "2026-11-16", "w zeszłym tygodniu"},
		{"w ubiegłym miesiącu", "2026-10-01", "2026-11-01", "w ubiegłym miesiącu"},
		{"w zeszłym roku", "2025-01-01", "2026-01-01", "w zeszłym roku"},
		{"trzy dni temu", "2026-11-15", "2026-11-16", "trzy dni temu"},
		{"tydzień temu", "2026-11-09", "2026-11-16", "tydzień temu"},
		{"rok temu", "2025-01-01", "2026-01-01", "rok temu"},
		{"kilka dni temu", "2026-11-11", "2026-11-17", "kilka dni temu"},
		{"w zeszły piątek", "2026-11-13", "2026-11-14", "w zeszły piątek"},
		{"w maju", "2026-05-01", "2026-06-01", "w maju"},
		{"3 maja 2024", "2024-05-03", "2024-05-04", "3 maja 2024"},
		{"w ostatnich dniach", "2026-11-11", "2026-11-19", "ostatnich dniach"},
		{"w 2024 roku", "2024-01-01", "2025-01-01", "w 2024"},
		{"w zeszły weekend", "2026-11-14", "2026-11-16", "w zeszły weekend"},
		{"dziś rano", "2026-11-18", "2026-11-18 12:00", "dziś rano"},
		// Accents typed as combining marks are the same words.
		{"la semaine dernie\u0300re", "2026-11-09", "2026-11-16", "la semaine dernie\u0300re"},
		// The first expression of the message, in whichever language.
		{"yesterday, or was it la semaine dernière?", "2026-11-17", "2026-11-18", "yesterday"},
		{"la semaine dernière, or yesterday?", "2026-11-09", "2026-11-16", "la semaine dernière"},
	})
}

// TestParseTimeEuropeanPartOfMonth: the beginning, middle and end of a
// month, read as English "early|mid|late <month>": days 1-10, 11-20 and 21
// to the end; without a year the most recent that has begun by at's day.
func TestParseTimeEuropeanPartOfMonth(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"Was habe ich Anfang Mai gesagt?", "2026-05-01", "2026-05-11", "Anfang Mai"},
		{"Mitte Oktober war ich in Rom", "2026-10-11", "2026-10-21", "Mitte Oktober"},
		{"Ende Februar", "2026-02-21", "2026-03-01", "Ende Februar"},
		{"Anfang November", "2026-11-01", "2026-11-11", "Anfang November"},
		{"Mitte November", "2026-11-11", "2026-11-21", "Mitte November"},
		// Not begun by at: last year's.
		{"Ende November", "2025-11-21", "2025-12-01", "Ende November"},
		{"Ende Dezember 2024", "2024-12-21", "2025-01-01", "Ende Dezember 2024"},
		{"Anfang April", "2026-04-01", "2026-04-11", "Anfang April"},
		{"Qu'est-ce que j'ai dit début mai ?", "2026-05-01", "2026-05-11", "début mai"},
		{"au début d'avril", "2026-04-01", "2026-04-11", "début d'avril"},
		{"à la mi-mai", "2026-05-11", "2026-05-21", "mi-mai"},
		{"fin août", "2026-08-21", "2026-09-01", "fin août"},
		{"à la fin du mois de juin 2025", "2025-06-21", "2025-07-01", "fin du mois de juin 2025"},
		{"¿Qué te dije a principios de mayo?", "2026-05-01", "2026-05-11", "principios de mayo"},
		{"a mediados de junio de 2025", "2025-06-11", "2025-06-21", "mediados de junio de 2025"},
		{"a finales de octubre", "2026-10-21", "2026-11-01", "finales de octubre"},
		{"a fines de enero", "2026-01-21", "2026-02-01", "fines de enero"},
		{"all'inizio di maggio", "2026-05-01", "2026-05-11", "inizio di maggio"},
		{"a metà giugno", "2026-06-11", "2026-06-21", "metà giugno"},
		{"Cosa ti ho detto a fine agosto?", "2026-08-21", "2026-09-01", "fine agosto"},
		{"no início de maio", "2026-05-01", "2026-05-11", "início de maio"},
		{"em meados de junho", "2026-06-11", "2026-06-21", "meados de junho"},
		{"O que eu disse no final de outubro?", "2026-10-21", "2026-11-01", "final de outubro"},
		{"Wat zei ik begin mei?", "2026-05-01", "2026-05-11", "begin mei"},
		{"half juni", "2026-06-11", "2026-06-21", "half juni"},
		{"eind augustus", "2026-08-21", "2026-09-01", "eind augustus"},
		{"begin september", "2026-09-01", "2026-09-11", "begin september"},
		{"Что я говорил в начале мая?", "2026-05-01", "2026-05-11", "начале мая"},
		{"в середине июня", "2026-06-11", "2026-06-21", "середине июня"},
		{"в конце октября", "2026-10-21", "2026-11-01", "конце октября"},
		{"Co mówiłem na początku maja?", "2026-05-01", "2026-05-11", "początku maja"},
		{"w połowie czerwca", "2026-06-11", "2026-06-21", "połowie czerwca"},
		{"pod koniec października", "2026-10-21", "2026-11-01", "koniec października"},
		// Plans, other years, and what is no part of a month.
		{"Ende Mai werde ich umziehen", "", "", ""},
		{"Je vais à Rome fin mai", "", "", ""},
		{"Anfang Mai 2030", "", "", ""},
		{"este fin de semana voy a la playa", "", "", ""},
		{"Ende gut, alles gut", "", "", ""},
		// English: "begin" and "half" before a capitalised month.
		{"We begin April with a sprint", "", "", ""},
		{"half September was gone", "", "", ""},
	})
}

// TestParseTimeEuropeanWeekdayCompounds: a German or Dutch weekday written
// as one word with a part of the day ("Montagabend", "maandagavond") is
// that part of that day, wherever the weekday alone is read.
func TestParseTimeEuropeanWeekdayCompounds(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"Was habe ich am Montagabend gesagt?", "2026-11-16 18:00", "2026-11-17", "Montagabend"},
		{"Worüber haben wir Sonntagvormittag gesprochen?", "2026-11-15", "2026-11-15 12:00", "Sonntagvormittag"},
		{"Samstagnacht habe ich dir was erzählt", "2026-11-14 18:00", "2026-11-15 06:00", "Samstagnacht"},
		{"letzten Freitagnachmittag", "2026-11-13 12:00", "2026-11-13 18:00", "letzten Freitagnachmittag"},
		{"Dienstagmorgen letzter Woche", "2026-11-10", "2026-11-10 12:00", "Dienstagmorgen letzter Woche"},
		{"letzte Woche am Donnerstagabend", "2026-11-12 18:00", "2026-11-13", "letzte Woche am Donnerstagabend"},
		{"Wat zei ik maandagavond?", "2026-11-16 18:00", "2026-11-17", "maandagavond"},
		{"vorige zaterdagochtend", "2026-11-14", "2026-11-14 12:00", "vorige zaterdagochtend"},
		// As the weekday alone: no past, a plan, a habit.
		{"Was mache ich am Montagabend?", "", "", ""},
		{"Jeden Montagabend war ich im Chor", "", "", ""},
	})
}

// TestParseTimeEuropeanReviewForms: forms a native review found missing
// (before: no range), and "Morgen" the morning read as no plan.
func TestParseTimeEuropeanReviewForms(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"¿Qué dije a final de mayo?", "2026-05-21", "2026-06-01", "final de mayo"},
		{"a finales del mes de mayo", "2026-05-21", "2026-06-01", "finales del mes de mayo"},
		{"agli inizi di maggio", "2026-05-01", "2026-05-11", "inizi di maggio"},
		{"alla fine del mese di maggio", "2026-05-21", "2026-06-01", "fine del mese di maggio"},
		{"a metà del mese di maggio", "2026-05-11", "2026-05-21", "metà del mese di maggio"},
		{"no início do mês de maio", "2026-05-01", "2026-05-11", "início do mês de maio"},
		{"Wat zei ik aan het begin van mei?", "2026-05-01", "2026-05-11", "begin van mei"},
		{"halverwege mei", "2026-05-11", "2026-05-21", "halverwege mei"},
		{"во второй половине мая", "2026-05-16", "2026-06-01", "второй половине мая"},
		{"в первых числах мая", "2026-05-01", "2026-05-11", "первых числах мая"},
		{"z początkiem maja", "2026-05-01", "2026-05-11", "początkiem maja"},
		{"Was habe ich Montag Morgen gesagt?", "2026-11-16", "2026-11-16 12:00", "Montag Morgen"},
		{"Was habe ich im Mai über den Morgen gesagt?", "2026-05-01", "2026-06-01", "im Mai"},
		// Still plans: tomorrow, next Monday.
		{"Was mache ich morgen im Mai?", "", "", ""},
		{"Was mache ich den nächsten Montag im Mai?", "", "", ""},
	})
}

// TestParseTimeEuropeanNearMisses: what reads another span than the
// words alone say, or no time at all: not read.
func TestParseTimeEuropeanNearMisses(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		// German "hier" is "here", and so is Dutch.
		{"Ich bin hier", "", "", ""},
		{"Was habe ich hier gesagt?", "", "", ""},
		{"Ik ben hier", "", "", ""},
		// Someone's final week, the last week of something.
		{"meine letzte Woche im alten Job", "", "", ""},
		{"die letzte Woche vor dem Urlaub", "", "", ""},
		// A count of days, not a time ago.
		{"il y a deux jours de congé", "", "", ""},
		// Plans: a month, a date or this weekend in a sentence about what
		// is to come.
		{"Was mache ich nächste Woche im Mai?", "", "", ""},
		{"Je vais à Paris en mai", "", "", ""},
		{"¿Qué voy a hacer el 3 de mayo?", "", "", ""},
		{"este fin de semana voy a la playa", "", "", ""},
		{"dit weekend", "", "", ""},
		// A weekday alone that is no day of the past: a plan, a habit, a
		// name, an ordinal, or the week follows.
		{"Was mache ich am Montag?", "", "", ""},
		{"Am Montag habe ich einen Termin", "", "", ""},
		{"¿Qué voy a hacer el lunes?", "", "", ""},
		{"Plácido Domingo cantó muy bien", "", "", ""},
		{"Na segunda vez que falamos", "", "", ""},
		{"Montag der letzten Woche habe ich das gesagt", "2026-11-09", "2026-11-10", "Montag der letzten Woche"},
		// A habit: every Monday, Italian "il lunedì", Spanish "los lunes".
		{"Jeden Montag war ich im Fitnessstudio", "", "", ""},
		{"Todos los lunes hablamos de eso", "", "", ""},
		{"Los lunes hablamos de trabajo", "", "", ""},
		{"Cada lunes te dije lo mismo", "", "", ""},
		{"Ogni lunedì abbiamo parlato di questo", "", "", ""},
		{"Il lunedì ho sempre fatto sport", "", "", ""},
		{"Chaque lundi on a parlé de ça", "", "", ""},
		{"Toda segunda eu disse isso", "", "", ""},
		// The word of the past is of another clause: what was said, of a
		// day to come.
		{"Te dije que el viernes no puedo", "", "", ""},
		{"Ti ho detto che sabato non posso", "", "", ""},
		{"Ik zei dat ik zaterdag niet kan", "", "", ""},
		{"Eu te disse que no sábado não posso", "", "", ""},
		{"Ich habe gesagt, dass ich am Samstag nicht kann", "", "", ""},
		{"Qu'est-ce que tu as dit que tu ferais lundi ?", "", "", ""},
		{"Am Montag gehe ich zum Arzt, wie ich gesagt habe", "", "", ""},
		{"Am Montag habe ich Geburtstag, hatte ich das erwähnt?", "", "", ""},
		// ... but a weekday alone before a comma is of the question's
		// clause, and the clause of the past may follow the weekday's.
		{"Am Montag, was habe ich da gesagt?", "2026-11-16", "2026-11-17", "Montag"},
		{"Lundi, qu'est-ce que j'ai dit ?", "2026-11-16", "2026-11-17", "Lundi"},
		{"Ich sagte ihm am Samstag, dass ich nicht kann", "2026-11-14", "2026-11-15", "Samstag"},
		{"Le dije el sábado que no podía", "2026-11-14", "2026-11-15", "sábado"},
		// A weekday before its date is the date's ("lundi 9 novembre").
		{"Qu'est-ce que j'ai dit lundi 9 novembre ?", "2026-11-09", "2026-11-10", "9 novembre"},
		{"¿Qué dije el lunes 9?", "", "", ""},
		// Russian and Polish plans.
		{"Что я буду делать в понедельник?", "", "", ""},
		{"W przyszłym tygodniu w maju", "", "", ""},
		// The last days of something else.
		{"die letzten Tage vor dem Umzug", "", "", ""},
		{"los últimos días de agosto", "", "", ""},
		{"les derniers jours avant le départ", "", "", ""},
		// Days that are not dates.
		{"am 31. Juni", "", "", ""},
		// Not time words: no range.
		{"Er fährt vor zwei Autos", "", "", ""},
		{"Das Haus vor dem Tag", "", "", ""},
	})
}

// TestTimeRestEuropean: what a timed question in these languages asks
// besides its time. Its grammar and words of talk are not searched within
// the range, so a question about a time alone returns the range's newest
// items; a greeting or thanks with a time is small talk.
func TestTimeRestEuropean(t *testing.T) {
	checkTimeRestBare(t, []restCase{
		{"Was habe ich letzte Woche gesagt?", []string{}, false},
		{"Worüber haben wir gestern gesprochen?", []string{}, false},
		{"Was habe ich letzte Woche über den Urlaub gesagt?", []string{"urlaub"}, false},
		{"Qu'est-ce que j'ai dit hier ?", []string{}, false},
		{"De quoi avons-nous parlé la semaine dernière ?", []string{}, false},
		{"¿Qué dije ayer sobre el viaje?", []string{"viaje"}, false},
		{"¿De qué hablamos la semana pasada?", []string{}, false},
		{"Di cosa abbiamo parlato ieri?", []string{}, false},
		{"O que eu disse ontem?", []string{}, false},
		{"Waar hebben we het gisteren over gehad?", []string{}, false},
		{"Wat zei ik vorige week?", []string{}, false},
		{"Danke für heute!", []string{}, true},
		{"Merci pour aujourd'hui", []string{}, true},
		{"¡Gracias por hoy!", []string{}, true},
		{"Grazie per oggi", []string{}, true},
		{"Obrigado por hoje", []string{}, true},
		{"Bedankt voor vandaag", []string{}, true},
		{"Что я сказал вчера?", []string{}, false},
		{"О чём мы говорили на прошлой неделе?", []string{}, false},
		{"Что я говорил вчера про отпуск?", []string{"отпуск"}, false},
		{"Спасибо за сегодня!", []string{}, true},
		{"Co powiedziałem wczoraj?", []string{}, false},
		{"O czym rozmawialiśmy w zeszłym tygodniu?", []string{}, false},
		{"Dziękuję za dzisiaj!", []string{}, true},
		// The beginning, middle or end of a month: the words around it
		// are grammar.
		{"Was habe ich Anfang Mai gesagt?", []string{}, false},
		{"Qu'est-ce que j'ai dit à la mi-mai ?", []string{}, false},
		{"¿Qué te dije a principios de mayo sobre el viaje?", []string{"viaje"}, false},
		{"Di cosa abbiamo parlato a fine agosto?", []string{}, false},
		{"O que eu disse no início de maio?", []string{}, false},
		{"Wat zei ik eind augustus?", []string{}, false},
		{"Что я говорил в конце октября?", []string{}, false},
		{"Co mówiłem pod koniec października?", []string{}, false},
		{"Co mówiłem na początku maja?", []string{}, false},
		{"Was habe ich am Montagabend über den Urlaub gesagt?", []string{"urlaub"}, false},
		{"Wat zei ik maandagavond?", []string{}, false},
	})
}

// longTimeUnitsEuropean are the texts of the long European messages.
var longTimeUnitsEuropean = []string{"Ich bin hier und wir haben über das Wetter gesprochen. ", "il y a deux chats dans la maison ",
	"3 4 5 6 7 8 9 10 ", "la semana que viene vamos a ", "hier ", "lundi ", "am Montag gehe ", "понедельник ",
	"the project will begin september ", "jedes Jahr Anfang Mai "}

// BenchmarkParseTimeEuropeanLong: 64 KiB messages of these languages'
// text, near misses and numbers (each word looks up the expressions
// starting with it, so the cost is linear).
func BenchmarkParseTimeEuropeanLong(b *testing.B) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	for _, unit := range longTimeUnitsEuropean {
		msg := strings.Repeat(unit, 64*1024/len(unit))
		b.Run(strings.Fields(unit)[0], func(b *testing.B) {
			for b.Loop() {
				ParseTime(msg, at)
			}
		})
	}
}

// TestParseTimeEuropeanReview: phrasings and near misses found in review.
func TestParseTimeEuropeanReview(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		// "desde hace", "desde há": for a time until now, not that time.
		{"Estoy enfermo desde hace dos semanas", "", "", ""},
		{"Estou doente desde há duas semanas", "", "", ""},
		// A year out of 1970 to at's: another year's month, as in English.
		{"im Mai 2027", "", "", ""},
		{"en mayo de 2030", "", "", ""},
		// French "en" ("j'en pensais") is no Dutch word; "et" is French.
		{"Hier, j'ai acheté un vélo. Qu'est-ce que j'en pensais ?", "2026-11-17", "2026-11-18", "Hier"},
		{"Et hier ?", "2026-11-17", "2026-11-18", "hier"},
		// Brazilian "essa", "retrasada"; "no dia 3 de novembro"; "1º".
		{"Eu disse algo essa semana?", "2026-11-16", "2026-11-23", "essa semana"},
		{"O que conversamos semana retrasada?", "2026-11-02", "2026-11-09", "semana retrasada"},
		{"O que eu disse mês retrasado?", "2026-09-01", "2026-10-01", "mês retrasado"},
		{"O que eu te contei no dia 3 de novembro?", "2026-11-03", "2026-11-04", "dia 3 de novembro"},
		{"¿Qué dije el 1º de mayo?", "2026-05-01", "2026-05-02", "1º de mayo"},
		// Italian "ad" before a vowel.
		{"Cosa ho detto ad aprile?", "2026-04-01", "2026-05-01", "ad aprile"},
		// The evening before yesterday, not the whole day.
		{"J'ai parlé à mon père avant-hier soir", "2026-11-16 18:00", "2026-11-17 06:00", "avant-hier soir"},
		{"vorgestern Abend", "2026-11-16 18:00", "2026-11-17", "vorgestern Abend"},
	})
}

// TestTimeRestEuropeanReview: the rest of timed questions found in review.
func TestTimeRestEuropeanReview(t *testing.T) {
	checkTimeRestBare(t, []restCase{
		// "was" is an English stop word, but it asks: no small talk.
		{"Was war letzten Dienstag?", []string{}, false},
		{"Hallo, was war gestern?", []string{}, false},
		// A follow-up about the time alone.
		{"Und gestern?", []string{}, false},
		{"¿Y ayer?", []string{}, false},
		{"E ontem?", []string{}, false},
		// A greeting is not searched within the range.
		{"Guten Morgen! Was haben wir gestern besprochen?", []string{}, false},
		{"¡Buenos días! ¿De qué hablamos ayer?", []string{}, false},
		{"Bom dia! Sobre o que falamos ontem?", []string{}, false},
		// The rest's language, when another (or English) read the time.
		{"Cosa ti ho raccontato il 3 novembre?", []string{}, false},
		{"¿Qué dije en 2024?", []string{}, false},
		{"Você pode resumir o que falamos esta semana?", []string{}, false},
		{"Wat zei ik in september?", []string{}, false},
		{"Was habe ich dir am 3. November erzählt?", []string{}, false},
		{"What did Anna say about the war in 2024?", []string{"anna", "war"}, false},
		// What did I do, and other grammar.
		{"¿Qué hice en octubre?", []string{}, false},
		{"Cosa ho fatto in ottobre?", []string{}, false},
		{"O que eu fiz em outubro?", []string{}, false},
		{"Qu'est-ce que j'ai fait en octobre ?", []string{}, false},
		{"Wat heb ik in oktober gedaan?", []string{}, false},
		{"Was hatte ich letzte Woche zum Thema Steuern geschrieben?", []string{"steuern"}, false},
		{"O que eu disse ontem sobre o projeto?", []string{"projeto"}, false},
	})
}

// TestParseTimeEuropeanRussianPolishReview: Russian and Polish found in
// review. A unit without its count is one only in its own form ("неделю
// назад", "rok temu"): "pół roku temu" was a year ago, read from "roku
// temu" (half a year is not read, as in English).
func TestParseTimeEuropeanRussianPolishReview(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"Co mówiłem pół roku temu?", "", "", ""},
		{"Что я говорил полтора года назад?", "", "", ""},
		{"Что мы обсуждали пол года назад?", "", "", ""},
		{"Что я говорил позавчера вечером?", "2026-11-16 18:00", "2026-11-17", "позавчера вечером"},
		{"Co mówiłem przedwczoraj wieczorem?", "2026-11-16 18:00", "2026-11-17", "przedwczoraj wieczorem"},
		{"В пятницу вечером я говорил с мамой", "2026-11-13 18:00", "2026-11-14", "пятницу вечером"},
		{"Co mówiłem w piątek wieczorem?", "2026-11-13 18:00", "2026-11-14", "piątek wieczorem"},
		{"Что я говорил за последнюю неделю?", "2026-11-11", "2026-11-19", "за последнюю неделю"},
		{"Что было за последний месяц?", "2026-10-18", "2026-11-19", "за последний месяц"},
		{"Co mówiłem w ostatnim tygodniu?", "2026-11-11", "2026-11-19", "w ostatnim tygodniu"},
		{"Co mówiłem w ciągu ostatnich dwóch tygodni?", "2026-11-04", "2026-11-19", "ostatnich dwóch tygodni"},
		{"w ostatnim tygodniu lipca", "", "", ""},
		{"в последние дни августа", "", "", ""},
		{"Co mówiłem w przeszłym tygodniu?", "2026-11-09", "2026-11-16", "w przeszłym tygodniu"},
		{"Что я говорил на прошедшей неделе?", "2026-11-09", "2026-11-16", "на прошедшей неделе"},
		// Plans in a verb of going.
		{"Я поеду в Москву в мае", "", "", ""},
		{"Pojadę do Krakowa w maju", "", "", ""},
		{"W maju jadę do Krakowa", "", "", ""},
	})
}

// TestParseTimeLongMessagesStayLinear: ParseTime's memory for a 64 KiB
// message grows with its length, not its square, for the messages of the
// CJK and European benchmarks (measured in bytes allocated, not time).
// Before, each Korean number split all the text before it into words:
// 64 KiB of "하루 이틀 사흘 " took 3.9 s and gigabytes.
func TestParseTimeLongMessagesStayLinear(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	for _, unit := range append(longTimeUnitsCJK, longTimeUnitsEuropean...) {
		msg := strings.Repeat(unit, 64*1024/len(unit))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ParseTime(msg, at)
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, 256*uint64(len(msg)); got > limit {
			t.Errorf("ParseTime of 64 KiB of %q allocated %d bytes, over %d", unit, got, limit)
		} else {
			t.Logf("%q: %d bytes", unit, got)
		}
	}
}

// TestTimeRestEuropeanWalk: the rest of timed questions from a walk with
// real conversations. Italian articles joined to a preposition ("sulla",
// "dell'", "degli") and "our conversation" in each language ("in unserem
// Gespräch", "nella nostra conversazione", "na nossa conversa") stayed
// keywords: nothing in the range said them, so the fallback brought the
// items of other weeks that did ("Gespräch" on November 9th for
// yesterday's conversation), or nothing.
func TestTimeRestEuropeanWalk(t *testing.T) {
	checkTimeRestBare(t, []restCase{
		{"Cosa ti ho detto sulla casa due settimane fa?", []string{"casa"}, false},
		{"Cosa ti ho detto dell'appartamento ieri?", []string{"appartamento"}, false},
		{"Cosa ti ho detto sull'appartamento la settimana scorsa?", []string{"appartamento"}, false},
		{"Cosa ti ho detto degli esami la settimana scorsa?", []string{"esami"}, false},
		{"Di cosa abbiamo parlato nella nostra conversazione di ieri?", []string{}, false},
		{"Was habe ich in unserem Gespräch gestern gesagt?", []string{}, false},
		{"¿Qué te dije en nuestra conversación de ayer?", []string{}, false},
		{"O que eu disse na nossa conversa de ontem?", []string{}, false},
		{"O que eu te disse numa conversa ontem?", []string{}, false},
		{"Wat zei ik gisteren in ons gesprek?", []string{}, false},
		{"Oye, ¿qué te dije ayer del piso?", []string{"piso"}, false},
		// Russian and Polish verbs of talk and grammar.
		{"Что я писал год назад?", []string{}, false},
		{"Можешь напомнить, о чём мы говорили вчера?", []string{}, false},
		{"Что нового было на этой неделе?", []string{}, false},
		{"Co mówiłeś wczoraj?", []string{}, false},
		{"Gdzie byłem pięć lat temu?", []string{}, false},
		{"O czym gadaliśmy wczoraj?", []string{}, false},
		{"Co pisałem rok temu?", []string{}, false},
		{"Możesz mi przypomnieć, o czym rozmawialiśmy wczoraj?", []string{}, false},
		{"Co mówiłem w ciągu ostatnich dwóch tygodni?", []string{}, false},
	})
}

// TestWithoutEuropeanGrammar: the grammar words of a message in one of
// these languages are not searched, whatever the user's language; a
// message in English or another language keeps its keywords.
func TestWithoutEuropeanGrammar(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want []string
	}{
		{"Qu'est-ce que tu sais de mon vélo ?", []string{"sais", "vélo"}},
		// "weißt" and "weet" are words of talk ("weißt du noch": do you
		// remember), not searched as English "know" is not.
		{"Was weißt du über meinen Hund?", []string{"hund"}},
		{"¿Qué sabes de mi perro?", []string{"sabes", "perro"}},
		{"Cosa sai del mio cane?", []string{"sai", "cane"}},
		{"O que você sabe sobre o meu cachorro?", []string{"sabe", "cachorro"}},
		{"Wat weet je van mijn hond?", []string{"hond"}},
		{"Что ты знаешь о моей собаке?", []string{"знаешь", "моей", "собаке"}},
		// English, and names that are other languages' words: unchanged
		// (want nil).
		{"What did Anna say about the war in 2024?", nil},
		{"Tell me about Die Hard and La La Land", nil},
		{"I met Maria e Ana at the Festa da Uva", nil},
	} {
		ks, _ := keywords(tt.msg)
		want := tt.want
		if want == nil {
			want = ks
		}
		if got := withoutEuropeanGrammar(tt.msg, ks); !slices.Equal(got, want) {
			t.Errorf("%q: keywords %q, want %q", tt.msg, got, want)
		}
	}
}

// BenchmarkWithoutEuropeanGrammar: what enrich adds to a message's
// keywords: a short question, and 64 KiB of French and of English.
func BenchmarkWithoutEuropeanGrammar(b *testing.B) {
	for _, m := range []struct{ name, msg string }{
		{"short", "Qu'est-ce que tu sais de mon vélo ?"},
		{"64KiB-fr", strings.Repeat("Qu'est-ce que tu sais de mon vélo et de la maison ? ", 65536/52)},
		{"64KiB-en", strings.Repeat("nothing about any time here at all ", 65536/35)},
	} {
		ks, _ := keywords(m.msg)
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				withoutEuropeanGrammar(m.msg, ks)
			}
		})
	}
}

// TestParseTimeEuropeanWeekdayReach: a weekday alone reads its sentence
// within euWeekdayReach words either side, so that a long message of
// weekdays is linear (64 KiB of "lundi " or "segunda " read the whole
// sentence at each: 11 s and 15 s). A past word within reach still makes
// it a day gone by; one past it, in a run-on sentence, does not.
func TestParseTimeEuropeanWeekdayReach(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	near := "J'ai parlé " + strings.Repeat("bla ", euWeekdayReach-3) + "lundi"
	if e, ok := ParseTime(near, at); !ok || e.Since.Format(time.DateOnly) != "2026-11-16" {
		t.Errorf("%q: %v %v, want Monday 2026-11-16", near, e, ok)
	}
	far := "J'ai parlé " + strings.Repeat("bla ", 4*euWeekdayReach) + "lundi"
	if e, ok := ParseTime(far, at); ok {
		t.Errorf("%q: read %v, want no range (the past word is out of the weekday's reach)", far, e)
	}
}

// TestParseTimeEuropeanReview2: a native review of the parts of a month and
// the weekday compounds. A year said in words after the month is that
// year's (it read this year's); the first or second half of a month is
// not its middle; a yearly habit, a name (Polish "Maja", French "Mars")
// and lower-case English "begin september 8" are no part of a month; a
// weekday followed by a week further back is that week's; "since" reads to
// at's day.
func TestParseTimeEuropeanReview2(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"Was habe ich Ende Mai letzten Jahres über Anna gesagt?", "2025-05-21", "2025-06-01", "Ende Mai letzten Jahres"},
		{"Ende Mai letztes Jahr war ich in Rom", "2025-05-21", "2025-06-01", "Ende Mai letztes Jahr"},
		{"Was habe ich Mitte Mai vor zwei Jahren gesagt?", "2024-05-11", "2024-05-21", "Mitte Mai vor zwei Jahren"},
		{"Was habe ich am 3. Mai letzten Jahres gesagt?", "2025-05-03", "2025-05-04", "3. Mai letzten Jahres"},
		{"Qu'est-ce que j'ai dit fin mai l'année dernière ?", "2025-05-21", "2025-06-01", "fin mai l'année dernière"},
		{"¿Qué dije a finales de mayo del año pasado?", "2025-05-21", "2025-06-01", "finales de mayo del año pasado"},
		{"Cosa ti ho detto a fine maggio dell'anno scorso?", "2025-05-21", "2025-06-01", "fine maggio dell'anno scorso"},
		{"Em meados de maio do ano passado eu estava em Lisboa", "2025-05-11", "2025-05-21", "meados de maio do ano passado"},
		{"Wat zei ik eind mei vorig jaar?", "2025-05-21", "2025-06-01", "eind mei vorig jaar"},
		{"Что я говорил в конце мая прошлого года?", "2025-05-21", "2025-06-01", "конце мая прошлого года"},
		{"Co mówiłem pod koniec maja zeszłego roku?", "2025-05-21", "2025-06-01", "koniec maja zeszłego roku"},
		{"Ende Mai, letztes Jahr war toll", "2026-05-21", "2026-06-01", "Ende Mai"},
		{"Nella prima metà di maggio ero a Roma", "2026-05-01", "2026-05-16", "prima metà di maggio"},
		{"Nella seconda metà di maggio ero a Roma", "2026-05-16", "2026-06-01", "seconda metà di maggio"},
		{"W pierwszej połowie maja byłem w Rzymie", "2026-05-01", "2026-05-16", "pierwszej połowie maja"},
		{"W drugiej połowie maja byłem w Rzymie", "2026-05-16", "2026-06-01", "drugiej połowie maja"},
		{"Na początku Maja była nieśmiała, co o niej mówiłem?", "", "", ""},
		{"Pod koniec Maja powiedziała, że ma dość", "", "", ""},
		{"W końcu Maja przyszła na imprezę", "", "", ""},
		{"NA POCZĄTKU MAJA", "2026-05-01", "2026-05-11", "POCZĄTKU MAJA"},
		{"J'ai lu un article sur la fin de Mars comme planète habitable", "", "", ""},
		{"Fin Mars j'étais à Paris", "2026-03-21", "2026-04-01", "Fin Mars"},
		{"Jedes Jahr Anfang Mai fahren wir an den Gardasee", "", "", ""},
		{"Tous les ans début mai on allait en Bretagne", "", "", ""},
		{"Todos los años a principios de mayo íbamos a Sevilla", "", "", ""},
		{"Ogni anno a fine maggio andavamo al mare", "", "", ""},
		{"Elk jaar begin mei waren we op Texel", "", "", ""},
		{"Каждый год в начале мая мы ездили на дачу", "", "", ""},
		{"Co roku na początku maja jeździliśmy nad morze", "", "", ""},
		{"did the classes begin september 8 last year?", "2025-01-01", "2026-01-01", "last year"},
		{"the project will begin september", "", "", ""},
		{"Ik was begin mei in Rome", "2026-05-01", "2026-05-11", "begin mei"},
		{"Was habe ich Donnerstagabend vor zwei Wochen gesagt?", "2026-11-05 18:00", "2026-11-06", "Donnerstagabend vor zwei Wochen"},
		{"Was habe ich Freitagabend vorletzter Woche gesagt?", "2026-11-06 18:00", "2026-11-07", "Freitagabend vorletzter Woche"},
		{"Was habe ich am Montag vorletzter Woche gesagt?", "2026-11-02", "2026-11-03", "Montag vorletzter Woche"},
		{"Wat zei ik zondagmiddag twee weken geleden?", "2026-11-08 12:00", "2026-11-08 18:00", "zondagmiddag twee weken geleden"},
		{"¿Qué dije el lunes hace dos semanas?", "2026-11-02", "2026-11-03", "lunes hace dos semanas"},
		{"Plácido Domingo hace dos semanas cantó", "2026-11-02", "2026-11-09", "hace dos semanas"},
		{"Was habe ich seit Anfang Oktober über das Projekt gesagt?", "2026-10-01", "2026-11-19", "seit Anfang Oktober"},
		{"Depuis début octobre je cours tous les jours, je te l'ai dit ?", "2026-10-01", "2026-11-19", "Depuis début octobre"},
		{"Desde principios de octubre no duermo bien, ¿te lo dije?", "2026-10-01", "2026-11-19", "Desde principios de octubre"},
		{"od początku maja nie palę", "2026-05-01", "2026-11-19", "od początku maja"},
		{"a festa da semana passada", "2026-11-09", "2026-11-16", "semana passada"},
	})
}

// TestParseTimeEuropeanReviewLate: "since" followed by "until" is a span
// to a second time, not one to at's day; a yearly habit in one sentence
// leaves the next sentence's expression read; lower-case English "half
// <month>" is checked as "begin <month>" is.
func TestParseTimeEuropeanReviewLate(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC) // a Wednesday
	checkParseTimeBare(t, at, []parseCase{
		{"od 3 maja do 10 maja byłem w Rzymie", "2026-05-03", "2026-05-04", "3 maja"},
		{"dal 3 maggio al 10 maggio ero a Roma", "2026-05-03", "2026-05-04", "3 maggio"},
		{"seit Anfang Mai bis Ende Juni", "2026-05-01", "2026-05-11", "Anfang Mai"},
		{"depuis début mai jusqu'à fin juin", "2026-05-01", "2026-05-11", "début mai"},
		{"desde principios de mayo hasta finales de junio", "2026-05-01", "2026-05-11", "principios de mayo"},
		{"sinds begin mei tot eind juni", "2026-05-01", "2026-05-11", "begin mei"},
		{"seit Anfang Oktober", "2026-10-01", "2026-11-19", "seit Anfang Oktober"},
		{"Jedes Jahr Anfang Mai fahren wir an den Gardasee. Was habe ich letzte Woche darüber gesagt?", "2026-11-09", "2026-11-16", "letzte Woche"},
		{"Ogni anno a fine maggio andiamo al mare. Cosa ti ho detto ieri?", "2026-11-17", "2026-11-18", "ieri"},
		{"Jedes Jahr Anfang Mai fahren wir an den Gardasee", "", "", ""},
		{"I think the rain will go on for half september, what did you say about it?", "", "", ""},
		{"Wat heb ik half september gezegd?", "2026-09-11", "2026-09-21", "half september"},
	})
}

// TestParseTimeEuropeanPlansReadNearTheMonth: a plan or a habit is told by
// the words within euWeekdayReach of the month, as a weekday's past is:
// read whole for each month, a long sentence of habits ("jedes Jahr Anfang
// Mai " over 64 KiB, BenchmarkParseTimeEuropeanLong) took 0.74 s.
func TestParseTimeEuropeanPlansReadNearTheMonth(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	filler := strings.Repeat("und dann noch viel mehr ", euWeekdayReach/5+1)
	checkParseTime(t, at, []parseCase{
		{"Ich werde dir " + filler + "erzählen, was ich im Mai gesagt habe", "2026-05-01", "2026-06-01", "im Mai"},
		{"Jedes Jahr " + filler + "war ich im Mai in Rom", "2026-05-01", "2026-06-01", "im Mai"},
		{"Ich werde im Mai nach Rom fliegen", "", "", ""},
		{"Jedes Jahr im Mai war ich in Rom", "", "", ""},
	})
}

// TestParseTimeEnglishLeadReadsNearTheMonth: whether lower-case "begin
// <month>" is English is told by the words within euWeekdayReach of the
// month, not by the whole message: read whole for each one, 64 KiB of "the
// project will begin september " took 0.6 s (a review;
// BenchmarkParseTimeEuropeanLong has it now). So English far before a
// Dutch sentence does not decide it.
func TestParseTimeEnglishLeadReadsNearTheMonth(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	far := strings.Repeat("the ", 2*euWeekdayReach) + ". " + strings.Repeat("fiets ", euWeekdayReach) + "Wat heb ik begin september gezegd?"
	checkParseTime(t, at, []parseCase{
		{far, "2026-09-01", "2026-09-11", "begin september"},
		{"the project will begin september, as it was planned with the team", "", "", ""},
	})
}
