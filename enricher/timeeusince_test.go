package enricher

import (
	"testing"
	"time"
)

// TestParseTimeEuropeanSinceUntilNow: "since X until now" is since, and an
// until word that is an article or a preposition ("a minha mãe", "au
// bureau", "do pracy") leaves since as it is; only a time after the until
// word makes X alone (a review: 11 of these read a day or ten of May).
func TestParseTimeEuropeanSinceUntilNow(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	checkParseTime(t, at, []parseCase{
		// "since X until now/today" is still "since" (to at's day).
		{"od 3 maja do dziś nie piję kawy", "2026-05-03", "2026-11-19", "od 3 maja"},
		{"seit Anfang Mai bis heute", "2026-05-01", "2026-11-19", "seit Anfang Mai"},
		{"desde principios de mayo hasta hoy", "2026-05-01", "2026-11-19", "desde principios de mayo"},
		{"dal 3 maggio a oggi", "2026-05-03", "2026-11-19", "dal 3 maggio"},
		{"depuis début mai jusqu'à aujourd'hui", "2026-05-01", "2026-11-19", "depuis début mai"},
		{"sinds begin mei tot nu toe", "2026-05-01", "2026-11-19", "sinds begin mei"},
		// the "until" words that are articles or prepositions
		{"desde 3 de maio a minha mãe está doente", "2026-05-03", "2026-11-19", "desde 3 de maio"},
		{"desde principios de mayo a mi hermano le duele la espalda", "2026-05-01", "2026-11-19", "desde principios de mayo"},
		{"depuis début mai au bureau on ne parle que de ça", "2026-05-01", "2026-11-19", "depuis début mai"},
		{"dal 3 maggio al lavoro non parlo d'altro", "2026-05-03", "2026-11-19", "dal 3 maggio"},
		{"Od 3 maja do pracy jeżdżę rowerem", "2026-05-03", "2026-11-19", "Od 3 maja"},
		// without until: since
		{"seit Anfang Mai", "2026-05-01", "2026-11-19", "seit Anfang Mai"},
		{"od 3 maja", "2026-05-03", "2026-11-19", "od 3 maja"},
		// An article between since and the expression.
		{"desde o início de maio", "2026-05-01", "2026-11-19", "desde o início de maio"},
		{"Seit dem 3. Mai habe ich Rückenschmerzen", "2026-05-03", "2026-11-19", "Seit dem 3. Mai"},
		{"depuis le début mai", "2026-05-01", "2026-11-19", "depuis le début mai"},
		{"desde el lunes pasado", "2026-11-16", "2026-11-19", "desde el lunes pasado"},
		// habit then next expression
		{"Tous les ans début mai on part en Bretagne. Qu'est-ce que je t'ai dit hier ?", "2026-11-17", "2026-11-18", "hier"},
		{"Jedes Jahr Anfang Mai und Ende Juni fahren wir weg", "", "", ""},
	})
}
