package worker

// WithDefaults returns c with every zero field set to its default, as New
// does, so that callers (memoryd's flags, its composition root) show and use
// the worker's own defaults instead of repeating them.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// WithDefaults returns c with every zero field set to its default, as
// NewChanges does.
func (c ChangesConfig) WithDefaults() ChangesConfig { return c.withDefaults() }
