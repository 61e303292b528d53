package store

// WithDefaults returns c with every zero field set to its default, as Open
// does, so that callers show and use the store's own defaults instead of
// repeating them.
func (c Config) WithDefaults() Config { return c.withDefaults() }
