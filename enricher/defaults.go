package enricher

// WithDefaults returns c with every zero field set to its default, as New
// does, so that callers show and use the service's own defaults instead of
// repeating them.
func (c Config) WithDefaults() Config { return c.withDefaults() }
