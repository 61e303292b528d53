// Package ranking orders the context items a search matched: BM25F relevance
// over an item's question and answer, times a bounded recency prior. It is
// pure: the store reads the candidates and the statistics of the user's
// items (see store.Candidates), and this package only computes.
//
// # Scoring
//
// A context item's score is relevance × recency, both in 0..1, so a threshold
// on the score keeps one meaning whatever the query and however many items
// the user has. Relevance is BM25F (Okapi BM25 over two fields) computed on
// the user's own items:
//
//   - For each distinct query lexeme t (english stemming: "dogs" finds "dog")
//     an item holds, its field-weighted frequency is
//
//     f = tfq / (1 − B + B·lenq/avgq) + AnswerWeight · tfa / (1 − B + B·lena/avga)
//
//     where tfq and tfa count t in the question and in the answer, lenq and
//     lena are those fields' lengths (distinct lexemes) and avgq and avga
//     their means over the user's items: a word in a short question counts
//     more than in a long one, and the assistant's words count less than the
//     user's.
//
//   - t contributes idf(t) · f·(K1+1)/(f+K1) (repeats saturate), with
//     idf(t) = ln(1 + (n + IDFPrior − df + 0.5)/(df + 0.5)), n the user's
//     items and df those holding t: a word found in many of the user's items
//     says little about any of them. IDFPrior counts that many imaginary
//     items without the word, so that for a user with a handful of items
//     every word is not "common".
//
//   - s is the sum over the query's lexemes, and relevance = s/(s +
//     RelevanceHalf). One keyword held by one item in a hundred, found once
//     in a question of average length, gives s ≈ 4.4 and scores 0.64; found
//     only in the answer 0.56; a keyword in a third of the user's items
//     scores about 0.34 in a question; more keywords approach 1. The scale
//     is absolute, not relative to the best candidate, so a weak match stays
//     weak when nothing better exists.
//
//   - recency = 1 − RecencyWeight + RecencyWeight/(1 + age_days/RecencyDays),
//     age measured from the item's creation (the turn's time) to the query's
//     time; an item newer than that counts as age 0. It is a bounded prior:
//     it orders equally relevant items newest first, but an item keeps at
//     least 1 − RecencyWeight of its relevance however old, so a better
//     match is not buried because it was said months ago.
//
// The constants were chosen on public conversational-memory benchmarks
// (LoCoMo, LongMemEval), the same values for both; see docs/quality.md.
//
// # Params
//
// Rank uses DefaultParams; Params.Rank takes others, so that an alternative
// is measured (tools/memeval -cv cross-validates them) before a default
// changes. The sum over fields before saturation above is BM25F proper: a
// lexeme's question and answer counts saturate together, not each on its
// own. Besides the constants above, with BQuestion and BAnswer as B per
// field, Params holds seven changes that were measured and are off by
// default, as cross-validation found no held-out gain:
//
//   - VerboseReplyPower (default 0): the answer weight used is AnswerWeight
//     · r^−VerboseReplyPower, r the user's mean answer length over their
//     mean question length when over 1, so that an assistant's long replies
//     weigh less than a peer's replies of the message's length.
//
//   - StemWeight (default 1): what a position counts when it holds another
//     form of the lexeme than the query's word, for callers that tell forms
//     apart (Doc.Inflected): tfq and tfa above become tf − (1 −
//     StemWeight)·inflected.
//
//   - NeighbourPenalty (default 0): an item's score is multiplied by 1 −
//     NeighbourPenalty when another candidate created within
//     NeighbourWindow of it (an adjacent turn) ranks before it; the
//     threshold applies to the score so reduced.
//
//   - AdjacentWeight (default 0): added to s for each of at most two places
//     where two different query lexemes stand next to each other in the
//     item, for callers that count them (Doc.Adjacent).
//
//   - CoveragePower (default 0): s is multiplied by (m/T)^CoveragePower, m
//     the query lexemes the item holds and T those any candidate holds (a
//     soft AND).
//
//   - SessionWeight (default 0): s gains SessionWeight times the highest s
//     among the other candidates created within SessionWindow of the item
//     (its session).
//
//   - LaterPenalty (default 0): an item's score is multiplied by 1 −
//     LaterPenalty when another candidate was created before it, within
//     NeighbourWindow (the first mention of a subject ranks before the turns
//     that refer back to it).
//
// # Hybrid
//
// With embeddings, memoryd's enricher fuses the lexical score with a vector
// score; Hybrid holds the constants of both steps (VectorScore: an item's
// similarity to the query, calibrated against the user's items, over the
// best of n unrelated items by chance; Fuse: 1 − (1 − l)(1 − v·recency)),
// DefaultHybrid the enricher's, so that tools/memeval -cv measures others
// on the same offline searches.
package ranking
