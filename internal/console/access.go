package console

import (
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/httpauth"
)

// access is what each page needs of the signed-in principal (Config.Guard; see
// package httpauth), as the Kafka APIs behind it would: listings of the whole
// cluster DESCRIBE on the cluster; a topic's or group's page DESCRIBE on it; a
// topic's records READ on it; creating a topic CREATE on the cluster or the topic
// (createTopic); resetting a group's offsets READ on the group and the topic
// (resetOffsets), as kafka-consumer-groups --reset-offsets needs. The console acts
// through the node (the controller, its partitions, the admin client of the
// node's own principal), so these checks are what stands between a principal and
// the cluster. Static files, the create form and the not-found page need a
// signed-in principal only.
var access = map[string]httpauth.Rule{
	"GET /console/{$}":                     httpauth.Needs(httpauth.OnCluster(kmsg.ACLOperationDescribe)),
	"GET /console/topics":                  httpauth.Needs(httpauth.OnCluster(kmsg.ACLOperationDescribe)),
	"GET /console/new-topic":               httpauth.Authenticated(),
	"POST /console/topics":                 httpauth.Authenticated(), // CREATE: createTopic
	"GET /console/topics/{topic}":          httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationDescribe, "topic")),
	"GET /console/topics/{topic}/records":  httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationRead, "topic")),
	"GET /console/groups":                  httpauth.Needs(httpauth.OnCluster(kmsg.ACLOperationDescribe)),
	"GET /console/groups/{group}":          httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationDescribe, "group")),
	"POST /console/groups/{group}/offsets": httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationRead, "group")), // and READ topic: resetOffsets
	"GET /console/api/topics/{topic}":      httpauth.Needs(httpauth.OnTopic(kmsg.ACLOperationDescribe, "topic")),
	"GET /console/api/groups/{group}/lag":  httpauth.Needs(httpauth.OnGroup(kmsg.ACLOperationDescribe, "group")),
	"GET /console/static/":                 httpauth.Authenticated(),
	"/console/":                            httpauth.Authenticated(),
}

// writeGuardError renders a refused request as an error page.
func (c *Console) writeGuardError(w http.ResponseWriter, r *http.Request, status int, _, message string) {
	heading := "Not allowed"
	if status == http.StatusUnauthorized {
		heading = "Sign-in required"
	}
	c.renderError(w, r, status, heading, message)
}
