package extractor

// WithDefaults returns c with every zero field set to its default, as NewLLM
// does, so that callers show and use the extractor's own defaults instead of
// repeating them.
func (c LLMConfig) WithDefaults() LLMConfig { return c.withDefaults() }
