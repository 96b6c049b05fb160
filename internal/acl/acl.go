// Package acl is Strata's authorizer: Kafka's ACL model (resource patterns,
// principals, hosts, operations, allow and deny) and the decision whether a
// principal may perform an operation on a resource. It is pure: bindings in,
// decisions out. The metadata log stores the bindings; the Kafka handlers (and,
// through the same Authorizer, any other front door) ask it.
//
// # Decision (Kafka's StandardAuthorizer)
//
//  1. A super user is allowed everything.
//  2. The bindings that apply to the resource are those whose pattern matches its
//     name: LITERAL with the same name, LITERAL "*", or PREFIXED with a prefix of
//     the name. With none at all (for any principal), the answer is the default:
//     denied, unless AllowEveryoneIfNoACL.
//  3. Of those, the ones for the principal ("User:*" matches every principal) and
//     host ("*" matches every host) decide: any DENY for the operation (or ALL)
//     denies, whatever else allows.
//  4. Otherwise an ALLOW for the operation (or ALL) allows. DESCRIBE is also
//     allowed by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
//  5. Otherwise the operation is denied.
package acl

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterName is the name of the one cluster resource.
const ClusterName = "kafka-cluster"

// Wildcards.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // "User:alice", or WildcardPrincipal
	Host         string                      // an IP, or WildcardHost
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType // ALLOW or DENY
}

// ErrInvalidBinding means a binding cannot be stored: an unknown or filter-only
// (ANY, MATCH) value, an empty name, a malformed principal.
var ErrInvalidBinding = errors.New("acl: invalid binding")

// Validate checks that b is a concrete binding that can be stored.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId,
		kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	case kmsg.ACLResourceTypeCluster:
		if b.ResourceName != ClusterName {
			return fmt.Errorf("%w: the cluster resource is named %q, not %q", ErrInvalidBinding, ClusterName, b.ResourceName)
		}
	default:
		return fmt.Errorf("%w: resource type %v", ErrInvalidBinding, b.ResourceType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalidBinding)
	}
	// A PREFIXED "*" is stored, as Kafka stores it: it names the resources
	// whose names begin with "*", not every resource.
	if b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed {
		return fmt.Errorf("%w: pattern type %v", ErrInvalidBinding, b.PatternType)
	}
	// Kafka parses a principal as type and name split at the first colon,
	// either of them possibly empty.
	if !strings.Contains(b.Principal, ":") {
		return fmt.Errorf("%w: principal %q has no colon between its type and name", ErrInvalidBinding, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host", ErrInvalidBinding)
	}
	if b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %v", ErrInvalidBinding, b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %v", ErrInvalidBinding, b.Permission)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls): ANY (or nil for names)
// matches every value; PatternType MATCH selects the bindings that apply to the
// named resource.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate rejects filters that can match nothing because a value is unknown.
func (f Filter) Validate() error {
	if f.ResourceType <= kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser {
		return fmt.Errorf("%w: resource type %v", ErrInvalidBinding, f.ResourceType)
	}
	if f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed {
		return fmt.Errorf("%w: pattern type %v", ErrInvalidBinding, f.PatternType)
	}
	if f.Operation <= kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %v", ErrInvalidBinding, f.Operation)
	}
	if f.Permission <= kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow {
		return fmt.Errorf("%w: permission %v", ErrInvalidBinding, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternMatches(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// patternMatches reports whether b's pattern applies to a resource named name.
func patternMatches(b Binding, name string) bool {
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == WildcardResource
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// ClientHost is the host ACLs name a client connected from addr ("ip:port")
// by: its IP as Java's InetAddress.getHostAddress writes it, which Kafka
// compares ACL hosts with. IPv4 (an IPv4-mapped IPv6 address too) is dotted;
// IPv6 is eight hex groups without zero compression ("0:0:0:0:0:0:0:1"), its
// zone after "%". An addr that is not an IP is returned as it is.
func ClientHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is4() {
		return ip.String()
	}
	b := ip.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = strconv.FormatUint(uint64(b[2*i])<<8|uint64(b[2*i+1]), 16)
	}
	if zone := ip.Zone(); zone != "" {
		return strings.Join(groups, ":") + "%" + zone
	}
	return strings.Join(groups, ":")
}

// Authorizer decides requests against a fixed set of bindings. Build a new one
// when the bindings change; it is safe for concurrent use.
type Authorizer struct {
	superUsers           map[string]bool
	allowEveryoneIfNoACL bool
	byType               map[kmsg.ACLResourceType]*index
}

// index holds one resource type's bindings.
type index struct {
	literal  map[string][]Binding // by name, "*" included
	prefixed []Binding
}

// Config is an Authorizer's fixed settings.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource that no binding
	// names at all (Kafka's allow.everyone.if.no.acl.found); off by default.
	AllowEveryoneIfNoACL bool
}

// New returns an Authorizer over bindings.
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowEveryoneIfNoACL: cfg.AllowEveryoneIfNoACL, byType: map[kmsg.ACLResourceType]*index{}}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = true
	}
	for _, b := range bindings {
		ix := a.byType[b.ResourceType]
		if ix == nil {
			ix = &index{literal: map[string][]Binding{}}
			a.byType[b.ResourceType] = ix
		}
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			ix.prefixed = append(ix.prefixed, b)
		} else {
			ix.literal[b.ResourceName] = append(ix.literal[b.ResourceName], b)
		}
	}
	return a
}

// IsSuperUser reports whether principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides whether principal, connected from host, may perform op on the
// resource of type rt named name. See the package documentation for the rules.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	ix := a.byType[rt]
	found, allowed := false, false
	consider := func(b Binding) bool { // false: denied, stop
		found = true
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			return true
		}
		if b.Host != host && b.Host != WildcardHost {
			return true
		}
		if b.Permission == kmsg.ACLPermissionTypeDeny {
			return !(b.Operation == op || b.Operation == kmsg.ACLOperationAll)
		}
		if implies(b.Operation, op) {
			allowed = true
		}
		return true
	}
	if ix != nil {
		for _, key := range []string{name, WildcardResource} {
			for _, b := range ix.literal[key] {
				if !consider(b) {
					return false
				}
			}
			if name == WildcardResource {
				break
			}
		}
		for _, b := range ix.prefixed {
			if strings.HasPrefix(name, b.ResourceName) && !consider(b) {
				return false
			}
		}
	}
	if !found {
		return a.allowEveryoneIfNoACL
	}
	return allowed
}

// AuthorizeByResourceType reports whether principal, connected from host, may
// perform op on at least one resource of type rt, decided from the bindings
// alone (whether such a resource exists or not), as Kafka's
// Authorizer.authorizeByResourceType decides it:
//
//  1. What Authorize allows on a resource named "hardcode" is allowed (super
//     users; a resource no binding names under AllowEveryoneIfNoACL).
//  2. Of the bindings of type rt for the principal, host and op (or ALL), a
//     DENY of LITERAL "*" denies.
//  3. An ALLOW of LITERAL "*" allows.
//  4. Another ALLOW allows unless a DENY dominates it: a PREFIXED DENY of a
//     prefix of its name, or for a LITERAL ALLOW a LITERAL DENY of its name.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	ix := a.byType[rt]
	if ix == nil {
		return false
	}
	var allows []Binding
	deniedLiteral := map[string]bool{}
	var deniedPrefixes []string
	wildcardAllow := false
	consider := func(b Binding) bool { // false: a wildcard DENY
		if b.Principal != principal && b.Principal != WildcardPrincipal ||
			b.Host != host && b.Host != WildcardHost ||
			b.Operation != op && b.Operation != kmsg.ACLOperationAll {
			return true
		}
		wildcard := b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName == WildcardResource
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && wildcard:
			return false
		case b.Permission == kmsg.ACLPermissionTypeDeny && b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			deniedPrefixes = append(deniedPrefixes, b.ResourceName)
		case b.Permission == kmsg.ACLPermissionTypeDeny:
			deniedLiteral[b.ResourceName] = true
		case wildcard:
			wildcardAllow = true
		default:
			allows = append(allows, b)
		}
		return true
	}
	for _, bs := range ix.literal {
		for _, b := range bs {
			if !consider(b) {
				return false
			}
		}
	}
	for _, b := range ix.prefixed {
		if !consider(b) {
			return false
		}
	}
	if wildcardAllow {
		return true
	}
	for _, b := range allows {
		if b.PatternType == kmsg.ACLResourcePatternTypeLiteral && deniedLiteral[b.ResourceName] {
			continue
		}
		dominated := false
		for _, p := range deniedPrefixes {
			dominated = dominated || strings.HasPrefix(b.ResourceName, p)
		}
		if !dominated {
			return true
		}
	}
	return false
}

// implies reports whether an ALLOW for granted allows requested.
func implies(granted, requested kmsg.ACLOperation) bool {
	if granted == requested || granted == kmsg.ACLOperationAll {
		return true
	}
	switch requested {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}
