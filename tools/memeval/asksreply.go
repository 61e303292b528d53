package main

import (
	"strings"
	"unicode"
)

// asksReply says whether a question asks what the other side of the
// conversation said earlier (the assistant, when a user asks), for the
// cross-validation's "questions about the reply" variant: "you" followed,
// with at most two words between (none a pronoun: "you know I said" is the
// user's words), by a verb of telling or suggesting in the past ("you
// recommended", "you once mentioned", "you've given me"), or a reference
// to an earlier conversation ("in our previous chat"). English only. Not in
// the service: the variant was measured and not kept (docs/quality.md).
func asksReply(message string) bool {
	words := strings.FieldsFunc(strings.ToLower(strings.ReplaceAll(message, "’", "'")), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\''
	})
	for i, w := range words {
		switch {
		case w == "you" || w == "you've" || w == "you'd":
			for j := i + 1; j < len(words) && j <= i+3; j++ {
				if recalledVerbs[words[j]] {
					return true
				}
				if pronouns[words[j]] {
					break
				}
			}
		case earlierWords[w] && i > 0 && i+1 < len(words) && conversationWords[words[i+1]] &&
			(words[i-1] == "our" || words[i-1] == "that" || words[i-1] == "the"):
			return true
		}
	}
	return false
}

// recalledVerbs are past forms by which an assistant's words are recalled.
var recalledVerbs = wordSet(`mentioned said told suggested recommended gave given listed provided
	created wrote written shared explained described named proposed offered advised showed shown
	taught noted pointed answered replied composed generated compiled drafted outlined came made`)

// pronouns end the words that may stand between "you" and its verb.
var pronouns = wordSet(`i i'm i've i'd me my we we've us our he she they it it's`)

// earlierWords and conversationWords make "our previous conversation".
var (
	earlierWords      = wordSet(`previous last earlier past prior`)
	conversationWords = wordSet(`conversation conversations chat chats discussion`)
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}
