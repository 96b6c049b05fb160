package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/admin"
)

// Consumer instances live on the node that created them. A request for an
// instance this node does not hold (a poll, a commit, a close) is forwarded to
// the node that holds it, so clients behind a load balancer need no stickiness:
//
//  1. Every instance's group member carries a client id naming its consumer and
//     its node's HTTP address: "strata-http/<consumer>@<advertised http addr>".
//  2. A node without the instance asks the group's coordinator for the group's
//     members (DescribeGroups, or ShareGroupDescribe for a share group) and looks
//     for that consumer on another node. When the members cannot be listed, the
//     request answers 503 CONSUMER_LOOKUP_FAILED with Retry-After: serving it
//     here could make a second member of the same consumer.
//  3. It replays the request there, marked with forwardedHeader, and relays the
//     answer. A forwarded request is never forwarded again, so two nodes with
//     stale views cannot bounce a request between them.
//
// Every answer about an instance carries consumerNodeHeader, the address of the
// node that holds it, for clients that prefer to go there directly.
const (
	forwardedHeader    = "Strata-Forwarded-By"
	consumerNodeHeader = "Strata-Consumer-Node"
	memberClientPrefix = "strata-http/"
)

// memberClientID is the client id of the group member behind instance key.
func memberClientID(key instanceKey, nodeAddr string) string {
	return memberClientPrefix + key.consumer + "@" + nodeAddr
}

// parseMemberClientID reads a client id written by memberClientID.
func parseMemberClientID(id string) (consumer, nodeAddr string, ok bool) {
	rest, ok := strings.CutPrefix(id, memberClientPrefix)
	if !ok {
		return "", "", false
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return "", "", false
	}
	return rest[:at], rest[at+1:], true
}

// lookupTimeout bounds the lookup of a group's members. The admin client retries
// the coordinator's transient errors (loading, moving) within it.
const lookupTimeout = 5 * time.Second

// memberLister lists the client ids of the members of group, a share group when
// share is set, as the group's coordinator describes them. A group that does not
// exist has none.
type memberLister func(ctx context.Context, group string, share bool) ([]string, error)

// groupMembers is the memberLister of the API's admin client.
func (a *API) groupMembers(ctx context.Context, group string, share bool) ([]string, error) {
	if share {
		described, err := a.admin.DescribeShareGroups(ctx, group)
		g := described[group]
		switch {
		case err != nil:
			return nil, err
		case errors.Is(g.Err, kerr.GroupIDNotFound):
			return nil, nil // no share group of that name yet: its first member is being made
		case g.Err != nil:
			return nil, g.Err
		}
		return clientIDs(g.Members, func(m kadm.ShareGroupMember) string { return m.ClientID }), nil
	}
	described, err := admin.DescribeGroups(ctx, a.admin, group)
	g := described[group]
	switch {
	case err != nil:
		return nil, err
	case g.Err != nil:
		return nil, g.Err
	}
	return clientIDs(g.Members, func(m kadm.DescribedGroupMember) string { return m.ClientID }), nil
}

// clientIDs lists the client ids of a described group's members.
func clientIDs[M any](members []M, clientID func(M) string) []string {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = clientID(m)
	}
	return ids
}

// ownerElsewhere returns the HTTP address of the other node that holds the
// instance key (a share-group member when share is set), or "" when no other
// node does or this request was forwarded already: the caller then serves it
// here. When the group's members cannot be listed it answers a 503 to retry,
// since serving here could make a second member of the same consumer.
func (a *API) ownerElsewhere(r *http.Request, key instanceKey, share bool) (string, *apiError) {
	if r.Header.Get(forwardedHeader) != "" || a.cfg.AdvertisedAddr == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	ids, err := a.members(ctx, key.group, share)
	if err != nil {
		return "", lookupFailed(key, err)
	}
	for _, id := range ids {
		consumer, addr, ok := parseMemberClientID(id)
		if ok && consumer == key.consumer && addr != a.cfg.AdvertisedAddr {
			return addr, nil
		}
	}
	return "", nil
}

// forwarded answers r, whose body was body, when key is not this node's to serve:
// forwarded to the node holding the instance, or the error of a failed lookup.
// It reports whether it answered; if not, the caller serves r here.
func (a *API) forwarded(w http.ResponseWriter, r *http.Request, body []byte, key instanceKey, share bool) bool {
	owner, aerr := a.ownerElsewhere(r, key, share)
	switch {
	case aerr != nil:
		writeError(w, aerr)
	case owner != "":
		a.forward(w, r, body, owner)
	default:
		return false
	}
	return true
}

// lookupFailed is the 503 for a request about an instance this node does not
// hold when the group's members could not be listed: another node may hold it.
func lookupFailed(key instanceKey, err error) *apiError {
	ae := errorf(http.StatusServiceUnavailable, codeLookupFailed,
		"cannot tell which node holds consumer %q of group %q (describing the group failed: %v); retry", key.consumer, key.group, err)
	ae.retryAfter = 1
	return ae
}

// forward replays r, whose body was body, on the node at addr and relays its
// answer. A node that cannot be reached gets a 502 naming it.
func (a *API) forward(w http.ResponseWriter, r *http.Request, body []byte, addr string) {
	scheme := "http://"
	if a.cfg.ForwardTLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, scheme+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "forwarding to %s: %v", addr, err))
		return
	}
	for _, h := range []string{"Content-Type", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(forwardedHeader, a.cfg.AdvertisedAddr)
	resp, err := a.forwarder.Do(req)
	if err != nil {
		writeError(w, errorf(http.StatusBadGateway, codeForwardFailed, "the consumer lives on node %s, which did not answer: %v", addr, err))
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", consumerNodeHeader} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
