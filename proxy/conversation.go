package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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
