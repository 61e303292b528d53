package main

// clientCommands are the commands that talk to a running memoryd over NATS
// request-reply (enrich, facts, memory). Filled in with the enrich service.
func clientCommands() []command { return nil }
