package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// opening is what identifies a chat in each of its requests: the chat's
// first user message and the first assistant message after it, which
// every later request of the chat repeats in its history.
type opening struct {
	user string
	// reply is the first assistant message after user (its text, and the
	// ids of its tool calls), when the request holds one: hasReply.
	reply    string
	callIDs  []string
	hasReply bool
}

// readOpening reads the opening of messages, decoded as far as needed.
// ok is false when there is no user message.
func readOpening(messages []json.RawMessage) (o opening, ok bool) {
	for _, raw := range messages {
		var m struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if json.Unmarshal(raw, &m) != nil {
			continue // the upstream's to refuse; parseRequest read the last user message
		}
		switch {
		case !ok && m.Role == "user":
			o.user, ok = contentText(m.Content), true
		case ok && m.Role == "assistant":
			o.reply, o.hasReply = contentText(m.Content), true
			for _, c := range m.ToolCalls {
				o.callIDs = append(o.callIDs, c.ID)
			}
			return o, true
		}
	}
	return o, ok
}

// conversationID is the conversation_id of a turn of user's chat whose
// request opened with o, reply being the reply published with the turn
// (the chat's first reply when the request holds none: its first
// request). The same for each request of a chat that sends its history,
// so memoryd extracts each turn with the chat's earlier turns as context;
// another chat has another, however alike their later messages. A reply's
// text is compared without its reasoning and surrounding white space,
// which apps may drop from the history they send back. "" without a user
// message.
func conversationID(user string, o opening, ok bool, reply string) string {
	if !ok {
		return ""
	}
	if !o.hasReply {
		o.reply, o.callIDs = reply, nil
	}
	h := sha256.New()
	for _, s := range append([]string{user, noNUL(o.user), strings.TrimSpace(withoutReasoning(noNUL(o.reply)))}, o.callIDs...) {
		// Each field by its length first: no two lists of fields hash alike.
		_ = binary.Write(h, binary.BigEndian, uint64(len(s)))
		h.Write([]byte(s))
	}
	return "chat-" + hex.EncodeToString(h.Sum(nil)[:12])
}

// ConversationHeader names the chat a request belongs to, as the chat app
// knows it: its turns are published with that conversation_id in place of
// the hash of the chat's opening (conversationID), which two chats opening
// alike share. 1 to MaxConversationHeaderBytes letters, digits, '-', '_',
// '.' or ':' (UUIDs, numbers, "local:..."), surrounding spaces trimmed;
// another value, or the header sent twice, is a 400. Not forwarded.
const ConversationHeader = "X-Memory-Conversation"

// MaxConversationHeaderBytes bounds ConversationHeader's value.
const MaxConversationHeaderBytes = 128

// openWebUIChatHeader is the chat id Open WebUI sends with every request
// when its ENABLE_FORWARD_USER_INFO_HEADERS is set: read when
// ConversationHeader is absent, and ignored when it is not a conversation
// id by ConversationHeader's rules (the app sends it for any backend, not
// for memoryd: no 400 for it). Forwarded as the client's other headers.
const openWebUIChatHeader = "X-OpenWebUI-Chat-Id"

// clientConversation returns the conversation id the client names for the
// request, "" when it names none, or an error to refuse the request with.
func clientConversation(h http.Header) (string, error) {
	vs := h.Values(ConversationHeader)
	if len(vs) > 1 {
		return "", fmt.Errorf("the %s header was sent %d times: send it once", ConversationHeader, len(vs))
	}
	if len(vs) == 1 {
		if v := strings.TrimSpace(vs[0]); v != "" {
			if !isConversationID(v) {
				return "", fmt.Errorf("the %s header is %q: a conversation id is 1 to %d letters, digits, '-', '_', '.' or ':'",
					ConversationHeader, firstBytes(v, 64), MaxConversationHeaderBytes)
			}
			return v, nil
		}
	}
	if vs := h.Values(openWebUIChatHeader); len(vs) == 1 {
		if v := strings.TrimSpace(vs[0]); isConversationID(v) {
			return v, nil
		}
	}
	return "", nil
}

// isConversationID reports whether v is a conversation id by
// ConversationHeader's rules.
func isConversationID(v string) bool {
	if v == "" || len(v) > MaxConversationHeaderBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}
