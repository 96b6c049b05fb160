package handlers

import (
	"time"

	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
)

// throttle records bytes against the connection's client quota for key and
// returns how long to throttle it (0 without quotas or within them).
func (h *Handlers) throttle(c *protocol.ConnInfo, key string, bytes int) time.Duration {
	if h.cfg.Quotas == nil || c == nil {
		return 0
	}
	return h.cfg.Quotas.Record(h.cluster.Image(), quota.UserOf(c.Principal()), c.ClientID(), key, bytes)
}
