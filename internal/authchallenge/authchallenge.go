// Package authchallenge writes the WWW-Authenticate challenge of memoryd's
// HTTP surfaces that take an API key as a bearer token (the proxy, the MCP
// server): RFC 9110 §11.6.1 requires one on every 401.
package authchallenge

import (
	"net/http"
	"strings"
)

// Bearer returns the challenge of a request r refused with 401 on realm
// (plain ASCII without quotes or backslashes: it is written as it is):
// RFC 6750's Bearer scheme with the realm, and error="invalid_token" when
// r sent a bearer token (one the server does not know). A request without
// one (no Authorization header, another scheme, a malformed header) gets
// no error code, as RFC 6750 §3.1 says of a request lacking
// authentication.
func Bearer(realm string, r *http.Request) string {
	c := `Bearer realm="` + realm + `"`
	if HasBearer(r) {
		c += `, error="invalid_token"`
	}
	return c
}

// HasBearer reports whether r's Authorization header is a bearer token
// ("Bearer" in any case and one token after it), as the MCP SDK's
// RequireBearerToken reads it.
func HasBearer(r *http.Request) bool {
	f := strings.Fields(r.Header.Get("Authorization"))
	return len(f) == 2 && strings.EqualFold(f[0], "Bearer")
}
