// Package ranking orders a search's candidates: BM25F relevance over a
// context item's question and answer, times a bounded recency prior.
package ranking
