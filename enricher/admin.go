package enricher

import (
	"context"
	"log/slog"

	"github.com/memoryd/memoryd/events"
)

// adminOps answers the endpoint that acts on a user as a whole: forget. It
// reaches no store of its own; forgetting spans the memory, the turns, the
// jobs and the stream, which Config.Forget composes.
type adminOps struct {
	forget func(ctx context.Context, userID string) (events.ForgetReply, error) // nil: not enabled
	logger *slog.Logger
}

func (a adminOps) forgetUser(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	if a.forget == nil {
		return nil, &events.ServiceError{Code: 501, Description: "forget is not enabled on this memoryd"}
	}
	return func(ctx context.Context) (any, error) {
		a.logger.Info("forgetting user", "user_id", req.UserID)
		return a.forget(ctx, req.UserID)
	}, nil
}
