package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-stream/strata/internal/metadata"
)

// ConfigOp is an IncrementalAlterConfigs operation, with Kafka's codes.
type ConfigOp int8

// Config operations.
const (
	OpSet      ConfigOp = 0
	OpDelete   ConfigOp = 1
	OpAppend   ConfigOp = 2 // LIST keys only: add items not yet present
	OpSubtract ConfigOp = 3 // LIST keys only: remove items
)

// AlterConfigsResource is one resource of a (legacy) AlterConfigs request: its
// dynamic configs become exactly Configs.
type AlterConfigsResource struct {
	Type    metadata.ResourceType
	Name    string
	Configs map[string]string
}

// AlterConfigOp is one operation on one key.
type AlterConfigOp struct {
	Key   string
	Op    ConfigOp
	Value string
}

// IncrementalAlterConfigsResource is one resource of an IncrementalAlterConfigs
// request.
type IncrementalAlterConfigsResource struct {
	Type metadata.ResourceType
	Name string
	Ops  []AlterConfigOp
}

// ConfigResult is the outcome for one resource.
type ConfigResult struct {
	Type metadata.ResourceType
	Name string
	Err  error
}

// PlanAlterConfigs plans an AlterConfigs request: each resource's overrides are
// replaced by the given set. A resource fails or succeeds as a whole. A topic
// may have remote.storage.enable=true only with remoteStorage (see
// metadata.CheckTopicConfigChange).
func PlanAlterConfigs(img *metadata.Image, reqs []AlterConfigsResource, remoteStorage bool) ([]metadata.Record, []ConfigResult) {
	return planConfigs(img, len(reqs), remoteStorage, func(i int) (metadata.ResourceType, string) { return reqs[i].Type, reqs[i].Name },
		func(i int, current map[string]string) ([]metadata.Record, error) {
			req := reqs[i]
			var recs []metadata.Record
			for _, k := range sortedKeys(req.Configs) {
				v := req.Configs[k]
				if err := metadata.ValidateConfigChange(req.Type, k, v); err != nil {
					return nil, err
				}
				if cur, ok := current[k]; !ok || cur != v {
					recs = append(recs, &metadata.ConfigRecord{ResourceType: req.Type, ResourceName: req.Name, Key: k, Value: v})
				}
			}
			for _, k := range sortedKeys(current) {
				if _, keep := req.Configs[k]; !keep {
					recs = append(recs, &metadata.ConfigRecord{ResourceType: req.Type, ResourceName: req.Name, Key: k, Delete: true})
				}
			}
			return recs, nil
		})
}

// PlanIncrementalAlterConfigs plans an IncrementalAlterConfigs request. APPEND and
// SUBTRACT start from the resource's own value of the key, else its built-in
// default (see startValue). remoteStorage is as for PlanAlterConfigs.
func PlanIncrementalAlterConfigs(img *metadata.Image, reqs []IncrementalAlterConfigsResource, remoteStorage bool) ([]metadata.Record, []ConfigResult) {
	return planConfigs(img, len(reqs), remoteStorage, func(i int) (metadata.ResourceType, string) { return reqs[i].Type, reqs[i].Name },
		func(i int, current map[string]string) ([]metadata.Record, error) {
			req := reqs[i]
			if dups := duplicates(len(req.Ops), func(j int) string { return req.Ops[j].Key }); len(dups) > 0 {
				return nil, fmt.Errorf("%w: key %q appears more than once", metadata.ErrInvalidRequest, sortedSet(dups)[0])
			}
			var recs []metadata.Record
			for _, op := range req.Ops {
				rec, err := planConfigOp(req.Type, req.Name, current, op)
				if err != nil {
					return nil, err
				}
				if rec != nil {
					recs = append(recs, rec)
				}
			}
			return recs, nil
		})
}

func planConfigOp(rt metadata.ResourceType, name string, current map[string]string, op AlterConfigOp) (*metadata.ConfigRecord, error) {
	// Deleting a key with no override is a no-op, whether Strata knows the key
	// or not, as in Kafka 4.4 (tools clear configs Strata lacks:
	// kafka-reassign-partitions --verify and --cancel delete the log-dir move
	// throttle with the replication throttles).
	if _, ok := current[op.Key]; !ok && op.Op == OpDelete {
		return nil, nil
	}
	def, err := metadata.LookupConfig(rt, op.Key)
	if err != nil {
		return nil, err
	}
	if rt == metadata.ResourceClientMetrics && (op.Op == OpAppend || op.Op == OpSubtract) {
		// Kafka 4.4 looks the key's type up among the broker's and finds none.
		return nil, fmt.Errorf("%w: can't append to or subtract from client metrics key %s", metadata.ErrInvalidConfig, op.Key)
	}
	rec := &metadata.ConfigRecord{ResourceType: rt, ResourceName: name, Key: op.Key}
	switch op.Op {
	case OpSet:
		rec.Value = op.Value
	case OpDelete:
		rec.Delete = true
		return rec, nil
	case OpAppend, OpSubtract:
		if def.Type != metadata.ConfigTypeList {
			return nil, fmt.Errorf("%w: %q is not a list; append and subtract need one", metadata.ErrInvalidConfig, op.Key)
		}
		items := metadata.ParseList(startValue(rt, def, current))
		for _, it := range metadata.ParseList(op.Value) {
			has := slices.Contains(items, it)
			switch {
			case op.Op == OpAppend && !has:
				items = append(items, it)
			case op.Op == OpSubtract && has:
				items = slices.DeleteFunc(items, func(s string) bool { return s == it })
			}
		}
		rec.Value = strings.Join(items, ",")
	default:
		return nil, fmt.Errorf("%w: config operation %d", metadata.ErrInvalidRequest, op.Op)
	}
	if err := metadata.ValidateConfigChange(rt, op.Key, rec.Value); err != nil {
		return nil, err
	}
	if cur, ok := current[op.Key]; ok && cur == rec.Value {
		return nil, nil
	}
	return rec, nil
}

// startValue is where APPEND and SUBTRACT start, as in Kafka's controller:
// the resource's own value of the key, else the key's built-in default (never
// the cluster-wide broker value).
func startValue(rt metadata.ResourceType, def metadata.ConfigDef, current map[string]string) string {
	key := def.BrokerName
	if rt == metadata.ResourceTopic || rt == metadata.ResourceGroup {
		key = def.Name
	}
	if v, ok := current[key]; ok {
		return v
	}
	return def.Default
}

// planConfigs runs plan for each resource that exists and is not repeated,
// passing its current dynamic configs; resources are independent.
func planConfigs(img *metadata.Image, n int, remoteStorage bool, resource func(int) (metadata.ResourceType, string),
	plan func(i int, current map[string]string) ([]metadata.Record, error)) ([]metadata.Record, []ConfigResult) {
	dups := duplicates(n, func(i int) string {
		rt, name := resource(i)
		return fmt.Sprintf("%d/%s", rt, name)
	})
	results := make([]ConfigResult, n)
	var recs []metadata.Record
	for i := range n {
		rt, name := resource(i)
		res := &results[i]
		res.Type, res.Name = rt, name
		if dups[fmt.Sprintf("%d/%s", rt, name)] {
			res.Err = fmt.Errorf("%w: %v %q appears more than once", metadata.ErrInvalidRequest, rt, name)
			continue
		}
		current, err := currentConfigs(img, rt, name)
		if err != nil {
			res.Err = err
			continue
		}
		resRecs, err := plan(i, current)
		if err == nil {
			var next *metadata.Image
			next, err = metadata.ApplyAll(img, resRecs)
			switch {
			case err != nil:
			case rt == metadata.ResourceTopic:
				err = metadata.CheckTopicConfigChange(current, next.Topic(name).Overrides, next.BrokerConfigs(""), remoteStorage)
			case rt == metadata.ResourceGroup:
				err = metadata.CheckGroupConfigs(img, next, name)
			}
		}
		if err != nil {
			res.Err = err
			continue
		}
		recs = append(recs, resRecs...)
	}
	return recs, results
}

func currentConfigs(img *metadata.Image, rt metadata.ResourceType, name string) (map[string]string, error) {
	switch rt {
	case metadata.ResourceTopic:
		if name == "" { // Kafka's words and code (INVALID_REQUEST)
			return nil, fmt.Errorf("%w: default topic resources are not allowed", metadata.ErrInvalidRequest)
		}
		t := img.Topic(name)
		if t == nil {
			return nil, metadata.KafkaText(metadata.ErrUnknownTopic, "The topic '%s' does not exist.", name)
		}
		return t.Overrides, nil
	case metadata.ResourceBroker:
		if err := metadata.ValidateBrokerResource(name); err != nil {
			return nil, err
		}
		return img.BrokerConfigs(name), nil
	case metadata.ResourceGroup:
		if err := metadata.ValidateGroupResource(name); err != nil {
			return nil, err
		}
		return img.GroupConfigs(name), nil
	case metadata.ResourceClientMetrics:
		if err := metadata.ValidateClientMetricsResource(name); err != nil {
			return nil, err
		}
		return img.ClientMetricsConfigs(name), nil
	}
	return nil, fmt.Errorf("%w: configs of %v are not supported", metadata.ErrInvalidRequest, rt)
}

func sortedSet(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
