package events_test

import (
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

func TestSnakeKey(t *testing.T) {
	t.Parallel()

	tests := []struct{ in, want string }{
		{"name", "name"},
		{"Favorite Color", "favorite_color"},
		{"favoriteColor", "favorite_color"},
		{"HTTPServer", "httpserver"},
		{"  --wife's  name-- ", "wife_s_name"},
		{"dog2Name", "dog2_name"},
		{"dateOfBirth", "date_of_birth"},
		{"favorite.color", "favorite_color"},
		{"favorite__color", "favorite_color"},
		{"café", "caf"},
		{"日本", ""},
		{"___", ""},
		{strings.Repeat("ab_", 40), strings.TrimSuffix(strings.Repeat("ab_", 40)[:events.MaxSnakeKeyBytes], "_")},
	}
	for _, tt := range tests {
		if got := events.SnakeKey(tt.in); got != tt.want {
			t.Errorf("events.SnakeKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSnakeKeyTooLong(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"name", false},
		{strings.Repeat("a", events.MaxSnakeKeyBytes), false},
		{strings.Repeat("a", events.MaxSnakeKeyBytes+1), true},
		// Separators collapse: the snake form is what counts.
		{strings.Repeat("a", events.MaxSnakeKeyBytes) + "___", false},
		{"  " + strings.Repeat("a", events.MaxSnakeKeyBytes) + "  ", false},
		// camelCase gains underscores: 44 letters, 66 in snake_case.
		{strings.Repeat("aB", 22), true},
		{"preferred_seat_when_travelling_by_long_distance_train_for_business_trips", true},
	} {
		if got := events.SnakeKeyTooLong(tt.in); got != tt.want {
			t.Errorf("events.SnakeKeyTooLong(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
