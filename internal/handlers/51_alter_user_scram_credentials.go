package handlers

// AlterUserScramCredentials (key 51), v0 (flexible): deletions and upsertions of
// SCRAM credentials, forwarded to the active controller. An upsertion carries the
// salt and the salted password (the client salts; the password never travels);
// the controller keeps only the derived stored and server keys. One result per
// user; a user named twice (any mechanisms) is DUPLICATE_RESOURCE, as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/controller"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) alterUserScramCredentials(ctx context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	if resp, ok := h.forwardIfNotController(ctx, r); ok {
		return resp
	}
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	dels := make([]controller.ScramDeletion, len(req.Deletions))
	for i, d := range req.Deletions {
		dels[i] = controller.ScramDeletion{User: d.Name, Mechanism: metadata.ScramMechanism(d.Mechanism)}
	}
	ups := make([]controller.ScramUpsertion, len(req.Upsertions))
	for i, u := range req.Upsertions {
		ups[i] = controller.ScramUpsertion{User: u.Name, Mechanism: metadata.ScramMechanism(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword}
	}
	results, err := h.cluster.AlterScramCredentials(ctx, dels, ups)
	h.awaitLocalApply(ctx)
	if err != nil {
		// The request as a whole failed (no controller, say): every user gets it.
		for _, user := range scramUsersOf(req) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, errorCode(err)
			msg := err.Error()
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
		}
		return reply(resp)
	}
	for _, rs := range results {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = rs.User
		if rs.Err != nil {
			res.ErrorCode = errorCode(rs.Err)
			msg := rs.Err.Error()
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}

// scramUsersOf lists the users a request names, once each, in order.
func scramUsersOf(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var users []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return users
}
