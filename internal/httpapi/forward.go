package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Consumer instances live on the node that created them. A request for an
// instance this node does not hold (a poll, a commit, a close) is forwarded to
// the node that holds it, so clients behind a load balancer need no stickiness:
//
//  1. Every instance's group member carries a client id naming its consumer and
//     its node's HTTP address: "strata-http/<consumer>@<advertised http addr>".
//  2. A node without the instance asks the group's coordinator for the group's
//     members (DescribeGroups) and looks for that consumer on another node.
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

// ownerElsewhere returns the HTTP address of the other node that holds the
// instance key, or "" when no other node does (or this request was forwarded
// already, or the group cannot be described now: the caller then serves it here).
func (a *API) ownerElsewhere(r *http.Request, key instanceKey) string {
	return a.findOwner(r, key, func(ctx context.Context) ([]string, error) {
		described, err := a.admin.DescribeGroups(ctx, key.group)
		g := described[key.group]
		if err != nil || g.Err != nil {
			return nil, cmp.Or(err, g.Err)
		}
		return clientIDs(g.Members, func(m kadm.DescribedGroupMember) string { return m.ClientID }), nil
	})
}

// clientIDs lists the client ids of a described group's members.
func clientIDs[M any](members []M, clientID func(M) string) []string {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = clientID(m)
	}
	return ids
}

// findOwner is ownerElsewhere over the client ids of the group's members, which
// clientIDs lists.
func (a *API) findOwner(r *http.Request, key instanceKey, clientIDs func(context.Context) ([]string, error)) string {
	if r.Header.Get(forwardedHeader) != "" || a.cfg.AdvertisedAddr == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	ids, err := clientIDs(ctx)
	if err != nil {
		return ""
	}
	for _, id := range ids {
		consumer, addr, ok := parseMemberClientID(id)
		if ok && consumer == key.consumer && addr != a.cfg.AdvertisedAddr {
			return addr
		}
	}
	return ""
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
