package enricher

// TEMPORARY until branch docs (store.ChunkQuery, store.ChunkHit) is merged.
type chunkQuery struct {
	Owner       string
	Collections []string
	Keywords    []string
	Limit       int
	MinScore    float64
}

type chunkHit struct {
	CollectionName string
	DocumentID     string
	Source         string
	HeadingPath    []string
	ChunkIndex     int
	Text           string
	Score          float64
}
