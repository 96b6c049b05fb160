package httpapi

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/httpauth"
)

// Access control (Config.Guard; see package httpauth). The embedded Kafka
// clients act as the node's own principal (the inter-broker user, a super user
// when ACLs are on): the API authorizes each request for the caller's principal
// here, with the Kafka listener's authorizer, before any call on the cluster.
// What each route needs, as the Kafka APIs it stands for need it:
//
//	POST /produce, POST /topics/{topic}/records   WRITE topic (Produce)
//	GET|POST /poll                  READ topic, READ group (Fetch, JoinGroup)
//	POST /commit                    READ group, READ each topic committed (OffsetCommit)
//	POST /ack                       READ group, READ topic (ShareAcknowledge)
//	POST /groups/{group}/configs    ALTER_CONFIGS group (IncrementalAlterConfigs)
//	POST /groups/{group}/seek       READ group, READ topic (ListOffsets, OffsetCommit)
//	DELETE /groups/{group}/consumers/{consumer}   READ group (LeaveGroup)
//	GET /groups                     lists the groups the principal may DESCRIBE (ListGroups)
//	GET /groups/{group}             DESCRIBE group (DescribeGroups, OffsetFetch)
//	POST /topics                    CREATE on the cluster or the topic (CreateTopics)
//	GET /topics                     lists the topics the principal may DESCRIBE (Metadata)
//	GET /topics/{topic}             DESCRIBE topic
//	DELETE /topics/{topic}          DELETE topic (DeleteTopics)
//	GET /openapi.json               open: the API's contract, no cluster data
//
// Resources named in the path are checked by the guard before the handler runs;
// those in the body by the handler once it has parsed it. A request forwarded
// to the node holding a consumer instance carries the caller's Authorization
// header and is authenticated and authorized there again.
var access = map[string]httpauth.Rule{
	"GET /openapi.json":            httpauth.Open(),
	"POST /produce":                httpauth.Authenticated(), // WRITE topic: handleProduce
	"POST /topics/{topic}/records": httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationWrite, "topic")),
	"GET /poll":                    httpauth.Authenticated(), // READ topic and group: handlePoll
	"POST /poll":                   httpauth.Authenticated(), // likewise
	"POST /commit":                 httpauth.Authenticated(), // READ group and topics: handleCommit
	"POST /ack":                    httpauth.Authenticated(), // READ group and topic: handleAck
	"POST /groups/{group}/configs": httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationAlterConfigs, "group")),
	"POST /groups/{group}/seek":    httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationRead, "group")), // and READ topic: handleSeek
	"DELETE /groups/{group}/consumers/{consumer}": httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationRead, "group")),
	"GET /groups":            httpauth.Authenticated(), // filtered: handleListGroups
	"GET /groups/{group}":    httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationDescribe, "group")),
	"POST /topics":           httpauth.Authenticated(), // CREATE: handleCreateTopic
	"GET /topics":            httpauth.Authenticated(), // filtered: handleListTopics
	"GET /topics/{topic}":    httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationDescribe, "topic")),
	"DELETE /topics/{topic}": httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationDelete, "topic")),
}

// guarded is h behind the route's access rule (none: refused while ACLs are on).
func (a *API) guarded(rt route, h http.Handler) http.Handler {
	return a.cfg.Guard.Wrap(access[rt.method+" "+rt.pattern], writeGuardError, h)
}

func writeGuardError(w http.ResponseWriter, _ *http.Request, status int, code, message string) {
	writeError(w, errorf(status, code, "%s", message))
}

// authorize answers 403 unless the request's principal may perform op on the
// resource named in its body.
func authorize(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) *apiError {
	return denied(httpauth.Require(r, op, rt, name))
}

// denied is the 403 answer for d, nil for none.
func denied(d *httpauth.Denial) *apiError {
	if d == nil {
		return nil
	}
	return errorf(http.StatusForbidden, d.Code, "%s", d.Message)
}

// sameOrigin is h behind a check against cross-site request forgery, as the
// console has: a request a browser sends from another origin's page is refused
// with 403. Bodies are read whatever their Content-Type, so without it a form or
// a fetch without preflight on any site could act on a node the browser reaches
// (and with the Basic credentials it has cached). Go's CrossOriginProtection lets
// safe methods through; GET /poll is not safe (it creates a member and moves its
// position), so it is checked as a POST.
func sameOrigin(rt route, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	asPost := rt.method == http.MethodGet && rt.pattern == "/poll"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		check := r
		if asPost {
			check = r.Clone(r.Context())
			check.Method = http.MethodPost
		}
		if err := cop.Check(check); err != nil {
			writeError(w, errorf(http.StatusForbidden, codeCrossOrigin,
				"refused a browser's request from another origin's page (%v); the API serves its own origin's pages and non-browser clients", err))
			return
		}
		h.ServeHTTP(w, r)
	})
}
