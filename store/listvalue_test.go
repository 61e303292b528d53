package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestListValue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	item := func(v string, minute int) shownItem {
		return shownItem{value: v, at: t0.Add(time.Duration(minute) * time.Minute), event: "e"}
	}
	many := func(n, size int) []shownItem {
		var items []shownItem
		for i := range n {
			items = append(items, item(fmt.Sprintf("%0*d", size, i), i))
		}
		return items
	}
	for _, c := range []struct {
		name  string
		items []shownItem
		want  func(string) bool
	}{
		{"joined in the order given", []shownItem{item("eggs", 2), item("peanuts", 1)}, func(v string) bool { return v == "eggs, peanuts" }},
		{"at most MaxListItems, the newest", many(MaxListItems+20, 3), func(v string) bool {
			parts := strings.Split(v, ", ")
			return len(parts) == MaxListItems && parts[0] == "020" && parts[len(parts)-1] == fmt.Sprint(MaxListItems+19)
		}},
		{"at most MaxListValueBytes, the newest", many(60, 200), func(v string) bool {
			return len(v) <= MaxListValueBytes && strings.HasSuffix(v, fmt.Sprintf("%0200d", 59)) && !strings.HasPrefix(v, fmt.Sprintf("%0200d", 0))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := listValue(c.items); !c.want(got) {
				t.Errorf("listValue = %.120q (%d bytes)", got, len(got))
			}
		})
	}
}
