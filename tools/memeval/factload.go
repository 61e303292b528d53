package main

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// loadKey is one key of the synthetic fact load with the values users get
// for it; user i takes values[(i+offset) % len(values)], where offset is the
// key's index, so that users differ and no two keys move in step.
type loadKey struct {
	key    string
	values []string
}

// factLoadKeys is a plausible profile of 40 facts, the kind a model
// extracts over months of conversations: who the user is (the core keys
// enrich always injects: name, pronouns, location, timezone, native_language,
// occupation), family, health, tastes, belongings and routines. Every key
// is canonical (events.CanonicalFactKey returns it unchanged: no alias, so
// no two keys merge into one), from the vocabulary where it has one and a
// free snake_case key otherwise; list keys hold items separated by ", ".
var factLoadKeys = []loadKey{
	{"name", []string{"Alex Morgan", "Priya Raman", "Tomás Silva", "Hannah Becker", "Kenji Watanabe"}},
	{"pronouns", []string{"she/her", "he/him", "they/them"}},
	{"location", []string{"Porto", "Austin", "Leeds", "Melbourne", "Toronto", "Lyon"}},
	{"hometown", []string{"Braga", "San Antonio", "York", "Adelaide", "Ottawa"}},
	{"timezone", []string{"Europe/Lisbon", "America/Chicago", "Europe/London", "Australia/Melbourne", "America/Toronto"}},
	{"native_language", []string{"Portuguese", "English", "Tamil", "German", "Japanese"}},
	{"languages", []string{"English, Spanish", "English, French", "English, German, Italian", "English"}},
	{"occupation", []string{"nurse", "software engineer", "high school teacher", "accountant", "graphic designer", "physiotherapist"}},
	{"employer", []string{"Northside Hospital", "Brightwave Labs", "Riverside Academy", "Keller & Co", "Studio Nine"}},
	{"birthday", []string{"1988-03-14", "1992-11-02", "1979-07-23", "1995-01-30", "1985-09-09"}},
	{"partner", []string{"Sam", "Jordan", "Maria", "Daniel", "Aiko"}},
	{"children", []string{"Lily, Noah", "Mateo", "Emma, Leo, Ava", "Oliver"}},
	{"siblings", []string{"one older brother", "two sisters", "a younger sister", "no siblings"}},
	{"pets", []string{"Rex (beagle)", "Miso (cat)", "Pepper (cat), Biscuit (dog)", "a goldfish named Bubbles"}},
	{"allergies", []string{"peanuts", "shellfish", "pollen, dust mites", "penicillin"}},
	{"diet", []string{"vegetarian", "pescatarian", "no dietary restrictions", "lactose-free", "vegan"}},
	{"favorite_food", []string{"ramen", "lasagna", "pad thai", "grilled sardines", "tacos"}},
	{"favorite_cuisine", []string{"Japanese", "Italian", "Thai", "Mexican", "Indian"}},
	{"favorite_music", []string{"jazz", "indie rock", "classical", "hip hop", "folk"}},
	{"favorite_band", []string{"Radiohead", "Fleetwood Mac", "Arctic Monkeys", "The National", "ABBA"}},
	{"favorite_movie", []string{"Spirited Away", "The Godfather", "Amélie", "Inception", "Before Sunrise"}},
	{"favorite_book", []string{"Pride and Prejudice", "Dune", "The Remains of the Day", "Normal People", "Sapiens"}},
	{"hobbies", []string{"hiking, photography", "knitting, baking", "rock climbing", "chess, gardening", "cycling, board games"}},
	{"sport", []string{"tennis", "running", "swimming", "yoga", "football"}},
	{"favorite_team", []string{"FC Porto", "Chicago Bulls", "Leeds United", "Melbourne Storm", "Toronto Raptors"}},
	{"instrument", []string{"guitar", "piano", "violin", "drums", "ukulele"}},
	{"car", []string{"2017 Honda Civic", "Toyota Prius", "VW Golf", "no car", "Tesla Model 3"}},
	{"commute", []string{"cycles to work", "takes the train", "drives 30 minutes", "works from home", "takes the bus"}},
	{"phone", []string{"iPhone 13", "Pixel 7", "Samsung Galaxy S22", "iPhone SE"}},
	{"laptop", []string{"MacBook Air", "ThinkPad X1", "Dell XPS 13", "Surface Laptop"}},
	{"education", []string{"BSc in Nursing, University of Porto", "MSc in Computer Science, UT Austin", "BA in History, University of Leeds", "BCom in Accounting, Monash University", "BA in Design, McGill University"}},
	{"work_schedule", []string{"9 to 5 on weekdays", "night shifts twice a week", "four-day week", "flexible hours, mostly mornings"}},
	{"home_type", []string{"two-bedroom apartment", "terraced house", "studio flat", "house with a garden"}},
	{"coffee_order", []string{"flat white", "oat latte", "black coffee", "cappuccino", "doesn't drink coffee"}},
	{"sleep_schedule", []string{"early riser, in bed by 10", "night owl", "sleeps around 11 pm"}},
	{"exercise_routine", []string{"gym three times a week", "runs every morning", "yoga on weekends", "walks 10k steps a day"}},
	{"streaming_services", []string{"Netflix, Spotify", "Disney+, Apple Music", "HBO Max", "Netflix, YouTube Premium"}},
	{"travel_wishlist", []string{"Japan, Iceland", "Peru", "New Zealand, Norway", "Morocco"}},
	{"health_goal", []string{"lower cholesterol", "run a half marathon", "sleep eight hours", "cut down on sugar"}},
	{"volunteering", []string{"food bank on Saturdays", "animal shelter", "coaches junior football", "literacy tutoring"}},
}

// factLoad returns user i's first n facts of the synthetic load, one per
// key of factLoadKeys, in that order (n is at most len(factLoadKeys)).
func factLoad(i, n int) [][2]string {
	out := make([][2]string, min(n, len(factLoadKeys)))
	for ki := range out {
		k := factLoadKeys[ki]
		out[ki] = [2]string{k.key, k.values[(i+ki)%len(k.values)]}
	}
	return out
}

// setFactLoad sets the synthetic fact load of every haystack's user through
// memory.facts.set, as a frontend's set_fact tool would: user i of hs gets
// factLoad(i, n). A value a later turn set stays (facts.set does not override
// a turn stamped later; none is, here).
func (in *instance) setFactLoad(ctx context.Context, hs []haystack, n int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, h := range hs {
		g.Go(func() error {
			for _, kv := range factLoad(i, n) {
				if _, err := in.client.SetFact(gctx, in.userID(h), kv[0], kv[1]); err != nil {
					return fmt.Errorf("facts.set %s for %s: %w", kv[0], h.name, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// factCounts returns how many facts each haystack's user holds.
func (in *instance) factCounts(ctx context.Context, hs []haystack) ([]int, error) {
	out := make([]int, len(hs))
	for i, h := range hs {
		fs, err := in.client.ListFacts(ctx, in.userID(h))
		if err != nil {
			return nil, fmt.Errorf("facts.list for %s: %w", h.name, err)
		}
		out[i] = len(fs)
	}
	return out, nil
}
