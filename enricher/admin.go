package enricher

import (
	"context"

	"github.com/memoryd/memoryd/events"
)

func (s *Service) forget(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	if s.cfg.Forget == nil {
		return nil, &events.ServiceError{Code: 501, Description: "forget is not enabled on this memoryd"}
	}
	return func(ctx context.Context) (any, error) {
		s.logger.Info("forgetting user", "user_id", req.UserID)
		return s.cfg.Forget(ctx, req.UserID)
	}, nil
}
