package store

// ReadCandidates reads candidate rows as recall does: rows[i] are a
// candidate's question, answer, event id, conversation id and tsvector text.
func ReadCandidates(cands []Candidate, rows [][5][]byte, terms []string, userID string) []Candidate {
	var cr candidateReader
	for i, c := range cands {
		if i == 0 { // the statistics row, with the terms, comes first
			cr.setTerms(terms)
		}
		r := rows[i]
		cr.add(c, r[0], r[1], r[2], r[3], r[4], false)
	}
	if !cr.known {
		cr.setTerms(terms)
	}
	return cr.decode(userID)
}

// ReadStoredCounts is readStoredCounts, for tests.
var ReadStoredCounts = readStoredCounts
