package extractor

import (
	"slices"
	"testing"
)

func TestRedactResult(t *testing.T) {
	t.Parallel()

	in := Result{
		Facts: map[string]string{"password": "hunter2", "name": "Ana", "card": "4111 1111 1111 1111",
			// A key holding a secret (an audit's model returned one).
			"ghp_LLMKEY1234567890abcdefghijklmnopqrstu": "works"},
		Context: []QA{{Q: "my pin is 4821", A: "Noted: your card 4111-1111-1111-1111 is saved"}},
	}
	got, kinds := RedactResult(in)
	want := Result{
		Facts:   map[string]string{"name": "Ana"},
		Context: []QA{{Q: "my pin is [redacted:password]", A: "Noted: your card [redacted:card] is saved"}},
	}
	if len(got.Facts) != len(want.Facts) || got.Facts["name"] != "Ana" {
		t.Errorf("facts = %v, want %v", got.Facts, want.Facts)
	}
	if !slices.Equal(got.Context, want.Context) {
		t.Errorf("context = %v, want %v", got.Context, want.Context)
	}
	if len(kinds) != 5 {
		t.Errorf("kinds = %v, want 5 spans", kinds)
	}
	if in.Facts["password"] != "hunter2" || in.Context[0].Q != "my pin is 4821" {
		t.Error("RedactResult modified its argument")
	}
}

// TestRedactResultChanges: the values of fact changes are redacted like
// facts; an added or removed item left without content is dropped, a
// delete is kept (the key is still no longer true) with its value emptied.
func TestRedactResultChanges(t *testing.T) {
	t.Parallel()

	in := Result{Changes: []FactChange{
		{OpAdd, "allergies", "shellfish"},
		{OpAdd, "allergies", "4111 1111 1111 1111"},
		{OpRemove, "pets", "Rex, card 4111-1111-1111-1111"},
		{OpDelete, "password", "hunter2"},
		{OpDelete, "car", "4111 1111 1111 1111"},
		{OpDelete, "diet", "vegetarian"},
		{OpAdd, "api_key", "sk-abcdefghijklmnopqrstuvwx"},
		{OpDelete, "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123", "x"},
	}}
	got, kinds := RedactResult(in)
	want := []FactChange{
		{OpAdd, "allergies", "shellfish"},
		{OpRemove, "pets", "Rex, card [redacted:card]"},
		{OpDelete, "password", ""},
		{OpDelete, "car", ""},
		{OpDelete, "diet", "vegetarian"},
	}
	if !slices.Equal(got.Changes, want) {
		t.Errorf("changes = %v, want %v", got.Changes, want)
	}
	if len(kinds) != 6 {
		t.Errorf("kinds = %v, want 6 spans", kinds)
	}
	if in.Changes[1].Value != "4111 1111 1111 1111" {
		t.Error("RedactResult modified its argument")
	}
}
