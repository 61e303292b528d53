package agenttools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// argTypes holds each tool's top-level argument types, by tool and
// argument name, as their schemas state them (addTool records them).
type argTypes map[string]map[string]string

// add records the types of schema's properties that state one type.
func (a argTypes) add(tool string, schema *jsonschema.Schema) {
	types := map[string]string{}
	for name, p := range schema.Properties {
		if p != nil && p.Type != "" {
			types[name] = p.Type
		}
	}
	a[tool] = types
}

// middleware refuses a tools/call whose top-level arguments are of another
// JSON type than their schema's, with one tool error naming each such
// argument, the type wanted and the one sent ("argument "id" must be an integer, not a
// string ("17"): send it without quotes"): the SDK's own refusal was a
// schema path ("validating /properties/id: type: 17 has type "string",
// want "integer"") a model could not be expected to act on (a walk). Any
// other call, and one whose types are right, goes on to the SDK, which
// validates the rest.
func (a argTypes) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil || len(r.Params.Arguments) == 0 {
			return next(ctx, method, req)
		}
		types := a[r.Params.Name]
		var args map[string]json.RawMessage
		if types == nil || json.Unmarshal(r.Params.Arguments, &args) != nil {
			return next(ctx, method, req)
		}
		// Every wrong one, in the order of their names: one retry can fix
		// them all, and the same call is refused in the same words.
		var wrong []string
		for _, name := range slices.Sorted(maps.Keys(args)) {
			if want, ok := types[name]; ok {
				if msg := wrongType(name, want, args[name]); msg != "" {
					wrong = append(wrong, msg)
				}
			}
		}
		if len(wrong) > 0 {
			msg := "invalid arguments: " + strings.Join(wrong, "; ")
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		}
		return next(ctx, method, req)
	}
}

// wrongType is the refusal of argument name, raw, when it is not of the
// JSON Schema type want (as far as the JSON type tells: an integer's
// fraction is the SDK's to refuse), "" when it is. A null is left to
// nullIsAbsent and the SDK. A value is shown by its first 40 bytes, cut
// at a character's end.
func wrongType(name, want string, raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	got := jsonType(raw)
	if got == "" || got == "null" || got == want || (got == "number" && want == "integer") || (got == "integer" && want == "number") {
		return ""
	}
	sent := typeName(got)
	if got == "integer" {
		sent = "a number" // 42 for a string: its being whole is beside the point
	}
	msg := fmt.Sprintf("argument %q must be %s, not %s", name, typeName(want), sent)
	var s string
	if got == "integer" || got == "number" || got == "boolean" {
		shown := string(raw)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		msg += " (" + shown + ")"
	}
	if got == "string" && json.Unmarshal(raw, &s) == nil {
		shown := s
		if len(shown) > 40 {
			n := 40
			for n > 0 && !utf8.RuneStart(shown[n]) {
				n--
			}
			shown = shown[:n] + "..."
		}
		msg += fmt.Sprintf(" (%q)", shown)
		if _, err := strconv.ParseFloat(s, 64); err == nil && (want == "integer" || want == "number") {
			msg += ": send it as a JSON number, without quotes"
		}
	}
	return msg
}

// jsonType is the JSON Schema type of the JSON value raw ("integer" for a
// number without a fraction or exponent), "" when raw is none.
func jsonType(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "number"
	}
	return "integer"
}

// typeName is a JSON Schema type in words.
func typeName(t string) string {
	switch t {
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "boolean":
		return "true or false"
	}
	return "a " + t
}
