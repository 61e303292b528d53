package store

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRecallStatementsParameters: every recall statement numbers its
// parameters 1..n without a gap, the facts' first keys ({core}) being the
// last, n, used once, and recall passes n arguments for it (its args are
// built in the order the statements number them: see recallStatements).
func TestRecallStatementsParameters(t *testing.T) {
	t.Parallel()
	want := map[recallShape]int{ // the shape's own parameters, before {core}
		{}: 4, {scoped: true}: 5, {ranged: true}: 6, {scoped: true, ranged: true}: 7,
		{ranged: true, latest: true}: 7, {scoped: true, ranged: true, latest: true}: 8,
		{hybrid: true}: 5, {scoped: true, hybrid: true}: 6, {ranged: true, hybrid: true}: 7,
		{scoped: true, ranged: true, hybrid: true}: 8,
		{pruned: true}: 6, {rest: true}: 5,
	}
	if len(recallStatements) != len(want) {
		t.Fatalf("%d recall statements, want %d", len(recallStatements), len(want))
	}
	param := regexp.MustCompile(`\$([0-9]+)`)
	for sh, n := range want {
		sql, ok := recallStatements[sh]
		if !ok {
			t.Errorf("%+v: no statement", sh)
			continue
		}
		if strings.Contains(sql, "{") && regexp.MustCompile(`\{[a-z]+\}`).MatchString(sql) {
			t.Errorf("%+v: a placeholder is left: %s", sh, sql)
		}
		seen := map[int]bool{}
		for _, m := range param.FindAllStringSubmatch(sql, -1) {
			i, _ := strconv.Atoi(m[1])
			seen[i] = true
		}
		for i := 1; i <= n+1; i++ {
			if !seen[i] {
				t.Errorf("%+v: $%d unused (parameters %v)", sh, i, seen)
			}
		}
		if len(seen) != n+1 {
			t.Errorf("%+v: %d parameters, want %d", sh, len(seen), n+1)
		}
		core := "$" + strconv.Itoa(n+1) + "::text[]"
		if strings.Count(sql, core) != 1 || strings.Count(sql, "$"+strconv.Itoa(n+1)) != 1 {
			t.Errorf("%+v: the first facts' keys are not %s, once", sh, core)
		}
	}
}
