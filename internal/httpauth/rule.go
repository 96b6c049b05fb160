package httpauth

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type ruleKind uint8

const (
	ruleUnset ruleKind = iota // the zero Rule: refused when an authorizer is on
	ruleOpen
	ruleAuthenticated
	ruleRequire
)

// Rule is what a route needs of the request's principal.
type Rule struct {
	kind   ruleKind
	checks []Need
}

// Need is one authorization a rule requires: an operation on the cluster, or on
// the topic or group a path value names.
type Need struct {
	op    kmsg.ACLOperation
	rt    kmsg.ACLResourceType
	param string // path value naming the resource; "" for the cluster
}

// Open is the rule of a route served without credentials.
func Open() Rule { return Rule{kind: ruleOpen} }

// Authenticated is the rule of a route any authenticated principal may use; its
// handler filters or checks what the body names.
func Authenticated() Rule { return Rule{kind: ruleAuthenticated} }

// Needs is the rule of a route that needs every one of needs.
func Needs(needs ...Need) Rule { return Rule{kind: ruleRequire, checks: needs} }

// OnCluster needs op on the cluster.
func OnCluster(op kmsg.ACLOperation) Need { return Need{op: op, rt: kmsg.ACLResourceTypeCluster} }

// OnTopic needs op on the topic the path value param names.
func OnTopic(op kmsg.ACLOperation, param string) Need {
	return Need{op: op, rt: kmsg.ACLResourceTypeTopic, param: param}
}

// OnGroup needs op on the group the path value param names.
func OnGroup(op kmsg.ACLOperation, param string) Need {
	return Need{op: op, rt: kmsg.ACLResourceTypeGroup, param: param}
}

// IsSet reports whether the rule was declared (the zero Rule is not).
func (r Rule) IsSet() bool { return r.kind != ruleUnset }

// IsOpen reports whether the rule serves requests without credentials.
func (r Rule) IsOpen() bool { return r.kind == ruleOpen }

// String describes the rule for documents and test failures: "open",
// "authenticated", or the needs ("READ topic {topic}, READ group {group}").
func (r Rule) String() string {
	switch r.kind {
	case ruleOpen:
		return "open"
	case ruleAuthenticated:
		return "authenticated"
	case ruleRequire:
		parts := make([]string, len(r.checks))
		for i, c := range r.checks {
			res := "cluster"
			if c.param != "" {
				res = strings.ToLower(c.rt.String()) + " {" + c.param + "}"
			}
			parts[i] = c.op.String() + " " + res
		}
		return strings.Join(parts, ", ")
	}
	return "unset"
}
