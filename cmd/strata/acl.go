package main

// strata acl create|list|delete: ACL bindings, through CreateAcls, DescribeAcls
// and DeleteAcls (what kafka-acls does). The broker needs --authorizer acl.

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/cli"
)

func aclCmd() *cobra.Command { return newACLCmd(processEnv()) }

func newACLCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	cmd := newParentCmd(env, g, "acl", "Create, list and delete ACLs (brokers started with --authorizer acl)")
	cmd.AddCommand(aclCreateCmd(env, g), aclListCmd(env, g), aclDeleteCmd(env, g))
	return cmd
}

// aclFlags name a resource pattern and an entry, for creating or filtering.
type aclFlags struct {
	topic, group      string
	cluster, prefixed bool
	principal, host   string
	operations        []string
	deny              bool
}

func (f *aclFlags) bind(cmd *cobra.Command, filter bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.topic, "topic", "", "the topic (or, with --prefixed, the topic name prefix)")
	fs.StringVar(&f.group, "group", "", "the consumer group (or, with --prefixed, the prefix)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.BoolVar(&f.prefixed, "prefixed", false, "the name is a prefix (PREFIXED pattern), not a literal name")
	fs.StringVar(&f.principal, "principal", "", "principal, e.g. User:alice (User:* for everyone)")
	fs.StringSliceVar(&f.operations, "operation", nil, "operations: read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write, all (repeatable)")
	fs.BoolVar(&f.deny, "deny", false, "a DENY entry (default ALLOW)")
	host := "*"
	if filter {
		host = ""
	}
	fs.StringVar(&f.host, "host", host, "client host the entry applies to (* for all)")
}

var aclOperations = map[string]kmsg.ACLOperation{
	"all": kmsg.ACLOperationAll, "read": kmsg.ACLOperationRead, "write": kmsg.ACLOperationWrite,
	"create": kmsg.ACLOperationCreate, "delete": kmsg.ACLOperationDelete, "alter": kmsg.ACLOperationAlter,
	"describe": kmsg.ACLOperationDescribe, "cluster-action": kmsg.ACLOperationClusterAction,
	"describe-configs": kmsg.ACLOperationDescribeConfigs, "alter-configs": kmsg.ACLOperationAlterConfigs,
	"idempotent-write": kmsg.ACLOperationIdempotentWrite,
}

// resource returns the resource type and name; with required, exactly one must
// be named.
func (f *aclFlags) resource(required bool) (kmsg.ACLResourceType, *string, error) {
	n := 0
	rt, name := kmsg.ACLResourceTypeAny, (*string)(nil)
	if f.topic != "" {
		n, rt, name = n+1, kmsg.ACLResourceTypeTopic, &f.topic
	}
	if f.group != "" {
		n, rt, name = n+1, kmsg.ACLResourceTypeGroup, &f.group
	}
	if f.cluster {
		cluster := acl.ClusterName
		n, rt, name = n+1, kmsg.ACLResourceTypeCluster, &cluster
	}
	if n > 1 || required && n == 0 {
		return 0, nil, cli.Usagef("name exactly one of --topic, --group and --cluster")
	}
	return rt, name, nil
}

func (f *aclFlags) ops(required bool) ([]kmsg.ACLOperation, error) {
	var out []kmsg.ACLOperation
	for _, name := range f.operations {
		op, ok := aclOperations[strings.ToLower(name)]
		if !ok {
			return nil, cli.Usagef("--operation %q: unknown", name)
		}
		out = append(out, op)
	}
	if required && len(out) == 0 {
		return nil, cli.Usagef("give at least one --operation")
	}
	return out, nil
}

func (f *aclFlags) pattern() kmsg.ACLResourcePatternType {
	if f.prefixed {
		return kmsg.ACLResourcePatternTypePrefixed
	}
	return kmsg.ACLResourcePatternTypeLiteral
}

func (f *aclFlags) permission() kmsg.ACLPermissionType {
	if f.deny {
		return kmsg.ACLPermissionTypeDeny
	}
	return kmsg.ACLPermissionTypeAllow
}

type aclJSON struct {
	ResourceType string `json:"resource_type"`
	Resource     string `json:"resource"`
	Pattern      string `json:"pattern"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func newACLJSON(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclJSON {
	return aclJSON{rt.String(), name, pt.String(), principal, host, op.String(), perm.String()}
}

func printACLs(s *session, acls []aclJSON) error {
	if s.json() {
		return cli.WriteJSON(s.env.stdout, acls)
	}
	tw := cli.NewTable(s.env.stdout, "RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
	for _, a := range acls {
		tw.Row(a.ResourceType, a.Resource, a.Pattern, a.Principal, a.Host, a.Operation, a.Permission)
	}
	return tw.Flush()
}

func aclCreateCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs: one per --operation",
		Example: "  strata acl create --principal User:alice --operation read --operation write --topic orders- --prefixed\n" +
			"  strata acl create --principal User:alice --operation read --group app",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	f.bind(cmd, false)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		rt, name, err := f.resource(true)
		if err != nil {
			return err
		}
		ops, err := f.ops(true)
		if err != nil {
			return err
		}
		if f.principal == "" {
			return cli.Usagef("give --principal")
		}
		req := kmsg.NewPtrCreateACLsRequest()
		var out []aclJSON
		for _, op := range ops {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, *name, f.pattern()
			c.Principal, c.Host, c.Operation, c.PermissionType = f.principal, f.host, op, f.permission()
			req.Creations = append(req.Creations, c)
			out = append(out, newACLJSON(rt, *name, f.pattern(), f.principal, f.host, op, f.permission()))
		}
		resp, err := aclRequest(ctx, s, req)
		if err != nil {
			return err
		}
		for _, r := range resp.(*kmsg.CreateACLsResponse).Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return brokerError("creating ACLs", err, deref(r.ErrorMessage))
			}
		}
		return printACLs(s, out)
	})
	return cmd
}

func aclListCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:               "list",
		Short:             "List ACLs, all or those matching the flags",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	f.bind(cmd, true)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		filter, err := f.filter()
		if err != nil {
			return err
		}
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = filter.ResourceType, filter.ResourceName, filter.ResourcePatternType
		req.Principal, req.Host, req.Operation, req.PermissionType = filter.Principal, filter.Host, filter.Operation, filter.PermissionType
		resp, err := aclRequest(ctx, s, req)
		if err != nil {
			return err
		}
		d := resp.(*kmsg.DescribeACLsResponse)
		if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
			return brokerError("listing ACLs", err, deref(d.ErrorMessage))
		}
		out := []aclJSON{}
		for _, r := range d.Resources {
			for _, a := range r.ACLs {
				out = append(out, newACLJSON(r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType))
			}
		}
		return printACLs(s, out)
	})
	return cmd
}

func aclDeleteCmd(env *clientEnv, g *globalFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:               "delete",
		Short:             "Delete the ACLs matching the flags (a resource or a principal is required)",
		Args:              usageArgs(env, cobra.NoArgs),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	f.bind(cmd, true)
	cmd.RunE = clientRun(env, g, func(ctx context.Context, s *session, _ *cobra.Command, _ []string) error {
		filter, err := f.filter()
		if err != nil {
			return err
		}
		if filter.ResourceName == nil && filter.Principal == nil {
			return cli.Usagef("name a resource (--topic, --group, --cluster) or a --principal: deleting every ACL takes both wildcards on purpose")
		}
		req := kmsg.NewPtrDeleteACLsRequest()
		req.Filters = append(req.Filters, filter)
		resp, err := aclRequest(ctx, s, req)
		if err != nil {
			return err
		}
		out := []aclJSON{}
		for _, r := range resp.(*kmsg.DeleteACLsResponse).Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return brokerError("deleting ACLs", err, deref(r.ErrorMessage))
			}
			for _, m := range r.MatchingACLs {
				out = append(out, newACLJSON(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType))
			}
		}
		if !s.json() {
			fmt.Fprintf(s.env.stdout, "deleted %d ACL(s)\n", len(out))
		}
		return printACLs(s, out)
	})
	return cmd
}

// filter is the DescribeAcls/DeleteAcls filter the flags describe: what is not
// given matches anything.
func (f *aclFlags) filter() (kmsg.DeleteACLsRequestFilter, error) {
	rt, name, err := f.resource(false)
	if err != nil {
		return kmsg.DeleteACLsRequestFilter{}, err
	}
	ops, err := f.ops(false)
	if err != nil {
		return kmsg.DeleteACLsRequestFilter{}, err
	}
	if len(ops) > 1 {
		return kmsg.DeleteACLsRequestFilter{}, cli.Usagef("give at most one --operation when filtering")
	}
	filter := kmsg.NewDeleteACLsRequestFilter()
	filter.ResourceType, filter.ResourceName, filter.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeAny
	if name != nil {
		filter.ResourcePatternType = f.pattern()
	}
	filter.Operation, filter.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if len(ops) == 1 {
		filter.Operation = ops[0]
	}
	if f.deny {
		filter.PermissionType = kmsg.ACLPermissionTypeDeny
	}
	if f.principal != "" {
		filter.Principal = &f.principal
	}
	if f.host != "" {
		filter.Host = &f.host
	}
	return filter, nil
}

func aclRequest(ctx context.Context, s *session, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	cl, _, err := s.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.Request(ctx, req)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
