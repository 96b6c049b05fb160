package acl

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny

	read      = kmsg.ACLOperationRead
	write     = kmsg.ACLOperationWrite
	describe  = kmsg.ACLOperationDescribe
	all       = kmsg.ACLOperationAll
	create    = kmsg.ACLOperationCreate
	describeC = kmsg.ACLOperationDescribeConfigs
	alterC    = kmsg.ACLOperationAlterConfigs
)

func b(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{rt, name, pt, principal, host, op, perm}
}

func TestAuthorize(t *testing.T) {
	bindings := []Binding{
		b(topic, "orders", literal, "User:alice", "*", read, allow),
		b(topic, "orders", literal, "User:alice", "10.0.0.9", read, deny),
		b(topic, "logs-", prefix, "User:bob", "*", write, allow),
		b(topic, "logs-secret", literal, "User:bob", "*", all, deny),
		b(topic, "*", literal, "User:*", "*", describe, allow),
		b(group, "app", literal, "User:alice", "*", read, allow),
		b(topic, "cfg", literal, "User:carol", "*", alterC, allow),
		b(cluster, ClusterName, literal, "User:carol", "*", create, allow),
	}
	a := New(Config{SuperUsers: []string{"User:admin"}}, bindings)
	open := New(Config{AllowEveryoneIfNoACL: true}, bindings)
	for _, tt := range []struct {
		name      string
		a         *Authorizer
		principal string
		host      string
		op        kmsg.ACLOperation
		rt        kmsg.ACLResourceType
		resource  string
		want      bool
	}{
		{"literal allow", a, "User:alice", "10.0.0.1", read, topic, "orders", true},
		{"deny wins for its host", a, "User:alice", "10.0.0.9", read, topic, "orders", false},
		{"another principal", a, "User:bob", "10.0.0.1", read, topic, "orders", false},
		{"read implies describe", a, "User:alice", "10.0.0.9", describe, topic, "orders", true},
		{"wildcard describe for everyone", a, "User:zed", "1.2.3.4", describe, topic, "anything", true},
		{"wildcard does not grant read", a, "User:zed", "1.2.3.4", read, topic, "anything", false},
		{"prefixed allow", a, "User:bob", "h", write, topic, "logs-app", true},
		{"prefix does not match", a, "User:bob", "h", write, topic, "log", false},
		{"deny ALL beats a prefixed allow", a, "User:bob", "h", write, topic, "logs-secret", false},
		{"deny ALL also denies describe", a, "User:bob", "h", describe, topic, "logs-secret", false},
		{"write does not imply read", a, "User:bob", "h", read, topic, "logs-app", false},
		{"group read", a, "User:alice", "h", read, group, "app", true},
		{"no ACL for the group: denied", a, "User:alice", "h", read, group, "other", false},
		{"no ACL: allowed when opted in", open, "User:alice", "h", read, group, "other", true},
		{"an ACL exists for someone else: still denied when opted in", open, "User:zed", "h", read, group, "app", false},
		{"alter configs implies describe configs", a, "User:carol", "h", describeC, topic, "cfg", true},
		{"describe configs does not imply alter", a, "User:zed", "h", alterC, topic, "cfg", false},
		{"cluster create", a, "User:carol", "h", create, cluster, ClusterName, true},
		{"super user", a, "User:admin", "h", kmsg.ACLOperationDelete, topic, "logs-secret", true},
	} {
		if got := tt.a.Authorize(tt.principal, tt.host, tt.op, tt.rt, tt.resource); got != tt.want {
			t.Errorf("%s: Authorize(%s, %s, %v, %v, %s) = %t, want %t", tt.name, tt.principal, tt.host, tt.op, tt.rt, tt.resource, got, tt.want)
		}
	}
}

func TestFilter(t *testing.T) {
	bindings := []Binding{
		b(topic, "orders", literal, "User:alice", "*", read, allow),
		b(topic, "ord", prefix, "User:bob", "*", write, allow),
		b(topic, "*", literal, "User:*", "*", describe, allow),
		b(group, "orders", literal, "User:alice", "*", read, allow),
	}
	str := func(s string) *string { return &s }
	for _, tt := range []struct {
		name string
		f    Filter
		want int
	}{
		{"everything", Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, 4},
		{"topic literal orders", Filter{topic, str("orders"), literal, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, 1},
		{"any pattern named orders", Filter{kmsg.ACLResourceTypeAny, str("orders"), kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, 2},
		{"match: what applies to topic orders", Filter{topic, str("orders"), kmsg.ACLResourcePatternTypeMatch, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, 3},
		{"principal", Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, str("User:bob"), nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, 1},
		{"operation", Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, read, kmsg.ACLPermissionTypeAny}, 2},
		{"deny only", Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, deny}, 0},
	} {
		n := 0
		for _, bd := range bindings {
			if tt.f.Matches(bd) {
				n++
			}
		}
		if n != tt.want {
			t.Errorf("%s: %d matches, want %d", tt.name, n, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := b(topic, "t", literal, "User:a", "*", read, allow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]Binding{
		"any resource":     b(kmsg.ACLResourceTypeAny, "t", literal, "User:a", "*", read, allow),
		"cluster name":     b(cluster, "c", literal, "User:a", "*", read, allow),
		"empty name":       b(topic, "", literal, "User:a", "*", read, allow),
		"match pattern":    b(topic, "t", kmsg.ACLResourcePatternTypeMatch, "User:a", "*", read, allow),
		"principal":        b(topic, "t", literal, "alice", "*", read, allow),
		"empty host":       b(topic, "t", literal, "User:a", "", read, allow),
		"any operation":    b(topic, "t", literal, "User:a", "*", kmsg.ACLOperationAny, allow),
		"any permission":   b(topic, "t", literal, "User:a", "*", read, kmsg.ACLPermissionTypeAny),
		"unknown resource": b(99, "t", literal, "User:a", "*", read, allow),
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPrefixedStar: a PREFIXED "*" binding (Kafka stores it) names the
// resources whose names begin with "*", not every resource; a principal is
// anything with a colon, as Kafka parses it.
func TestPrefixedStar(t *testing.T) {
	bindings := []Binding{
		b(group, "*", prefix, "User:alice", "*", read, allow),
		b(group, "g", literal, "User:", "*", read, allow),
	}
	for _, bd := range bindings {
		if err := bd.Validate(); err != nil {
			t.Fatalf("%+v: %v", bd, err)
		}
	}
	a := New(Config{}, bindings)
	for _, tt := range []struct {
		principal, group string
		want             bool
	}{
		{"User:alice", "*app", true},
		{"User:alice", "*", true},
		{"User:alice", "app", false},
		{"User:", "g", true},
		{"User:bob", "g", false},
	} {
		if got := a.Authorize(tt.principal, "10.0.0.1", read, group, tt.group); got != tt.want {
			t.Errorf("%s READ group %q: %v, want %v", tt.principal, tt.group, got, tt.want)
		}
	}
}

// TestAuthorizeByResourceType: whether a principal may perform an operation
// on at least one resource of a type, from the bindings alone (existing
// resources or not), as Kafka's Authorizer.authorizeByResourceType decides it:
// an ALLOW not dominated by a DENY (a literal DENY of the same name, or a
// PREFIXED DENY of a prefix of its name), any wildcard DENY denies, and what
// Authorize allows on a resource no binding names (super users,
// AllowEveryoneIfNoACL) is allowed.
func TestAuthorizeByResourceType(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg      Config
		bindings []Binding
		want     bool
	}{
		{"no bindings", Config{}, nil, false},
		{"no bindings, allow everyone", Config{AllowEveryoneIfNoACL: true}, nil, true},
		{"super user", Config{SuperUsers: []string{"User:alice"}}, []Binding{b(topic, "*", literal, "User:alice", "*", write, deny)}, true},
		{"literal allow of a topic that may not exist", Config{}, []Binding{b(topic, "orders", literal, "User:alice", "*", write, allow)}, true},
		{"prefixed allow", Config{}, []Binding{b(topic, "orders-", prefix, "User:*", "*", write, allow)}, true},
		{"ALL allows", Config{}, []Binding{b(topic, "orders", literal, "User:alice", "*", all, allow)}, true},
		{"another operation", Config{}, []Binding{b(topic, "orders", literal, "User:alice", "*", read, allow)}, false},
		{"another principal", Config{}, []Binding{b(topic, "orders", literal, "User:bob", "*", write, allow)}, false},
		{"another host", Config{}, []Binding{b(topic, "orders", literal, "User:alice", "10.0.0.2", write, allow)}, false},
		{"this host", Config{}, []Binding{b(topic, "orders", literal, "User:alice", "10.0.0.1", write, allow)}, true},
		{"another resource type", Config{}, []Binding{b(group, "orders", literal, "User:alice", "*", write, allow)}, false},
		{"literal deny of the same name", Config{}, []Binding{
			b(topic, "orders", literal, "User:alice", "*", write, allow),
			b(topic, "orders", literal, "User:alice", "*", write, deny)}, false},
		{"prefixed deny dominates", Config{}, []Binding{
			b(topic, "orders-eu", literal, "User:alice", "*", write, allow),
			b(topic, "orders-", prefix, "User:*", "*", all, deny)}, false},
		{"literal deny does not dominate a prefixed allow", Config{}, []Binding{
			b(topic, "orders-", prefix, "User:alice", "*", write, allow),
			b(topic, "orders-", literal, "User:alice", "*", write, deny)}, true},
		{"one allow not dominated", Config{}, []Binding{
			b(topic, "orders-eu", literal, "User:alice", "*", write, allow),
			b(topic, "logs", literal, "User:alice", "*", write, allow),
			b(topic, "orders-", prefix, "User:alice", "*", write, deny)}, true},
		{"wildcard deny", Config{}, []Binding{
			b(topic, "orders", literal, "User:alice", "*", write, allow),
			b(topic, "*", literal, "User:alice", "*", write, deny)}, false},
		{"wildcard allow", Config{}, []Binding{b(topic, "*", literal, "User:alice", "*", write, allow)}, true},
		{"wildcard allow, a literal deny", Config{}, []Binding{
			b(topic, "*", literal, "User:alice", "*", write, allow),
			b(topic, "orders", literal, "User:alice", "*", write, deny)}, true},
	} {
		a := New(tt.cfg, tt.bindings)
		if got := a.AuthorizeByResourceType("User:alice", "10.0.0.1", write, topic); got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, got, tt.want)
		}
	}
}

// TestClientHost: clients are named as Java's InetAddress.getHostAddress
// writes their address, as Kafka matches ACL hosts.
func TestClientHost(t *testing.T) {
	for addr, want := range map[string]string{
		"10.0.0.1:9092":          "10.0.0.1",
		"[::ffff:10.0.0.1]:9092": "10.0.0.1",
		"[::1]:9092":             "0:0:0:0:0:0:0:1",
		"[2001:db8::a:0]:1":      "2001:db8:0:0:0:0:a:0",
		"[fe80::1%eth0]:1":       "fe80:0:0:0:0:0:0:1%eth0",
		"[FE80::ABCD]:1":         "fe80:0:0:0:0:0:0:abcd",
		"2001:db8::1":            "2001:db8:0:0:0:0:0:1",
		"pipe":                   "pipe",
		"":                       "",
	} {
		if got := ClientHost(addr); got != want {
			t.Errorf("ClientHost(%q) = %q, want %q", addr, got, want)
		}
	}
}
