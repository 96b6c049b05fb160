package handlers

// DescribeUserScramCredentials (key 50), v0 (flexible): the SCRAM mechanisms and
// iteration counts of the named users (all users when Users is null or empty, as
// in Kafka), from this broker's metadata image; never salts or keys. A user
// named twice answers DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

func (h *Handlers) describeUserScramCredentials(_ context.Context, _ *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := h.cluster.Image()
	names := img.ScramUsers()
	if len(req.Users) > 0 {
		names = names[:0:0]
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	reported := map[string]bool{}
	for _, name := range names {
		if reported[name] {
			continue
		}
		reported[name] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		creds := img.ScramCredentials(name)
		switch {
		case count[name] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := fmt.Sprintf("Cannot describe SCRAM credentials for the same user twice in a single request: %s", name)
			res.ErrorMessage = &msg
		case len(creds) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := fmt.Sprintf("Attempt to describe a user credential that does not exist: %s", name)
			res.ErrorMessage = &msg
		}
		if res.ErrorCode == 0 {
			for _, c := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = int8(c.Mechanism), c.Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}
