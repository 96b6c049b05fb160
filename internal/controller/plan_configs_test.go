package controller

import (
	"errors"
	"maps"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func configBase(t *testing.T) *metadata.Image {
	img := withTopic(t, clusterImage(t, 1), "orders", idOrders,
		map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}, []int32{1})
	return apply(t, img, &metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Key: "log.segment.bytes", Value: "5000000"})
}

func TestPlanAlterConfigs(t *testing.T) {
	base := configBase(t)
	tests := []struct {
		name string
		reqs []AlterConfigsResource
		errs []error
		want map[string]string // orders overrides afterwards (nil: unchecked)
	}{
		{
			name: "replace the whole set",
			reqs: []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders", Configs: map[string]string{"retention.ms": "1000", "segment.ms": "60000"}}},
			errs: []error{nil},
			want: map[string]string{"retention.ms": "1000", "segment.ms": "60000"},
		},
		{
			name: "empty set clears",
			reqs: []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders"}},
			errs: []error{nil},
			want: map[string]string{},
		},
		{
			name: "one bad value fails the resource",
			reqs: []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders", Configs: map[string]string{"segment.ms": "60000", "retention.ms": "soon"}}},
			errs: []error{metadata.ErrInvalidConfig},
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"},
		},
		{
			name: "unknown topic",
			reqs: []AlterConfigsResource{{Type: metadata.ResourceTopic, Name: "nope"}},
			errs: []error{metadata.ErrUnknownTopic},
		},
		{
			name: "brokers",
			reqs: []AlterConfigsResource{
				{Type: metadata.ResourceBroker, Name: "", Configs: map[string]string{"log.retention.ms": "5"}},
				{Type: metadata.ResourceBroker, Name: "1", Configs: map[string]string{"message.max.bytes": "5"}},
				{Type: metadata.ResourceBroker, Name: "x", Configs: map[string]string{"message.max.bytes": "5"}},
				{Type: metadata.ResourceBroker, Name: "2", Configs: map[string]string{"retention.ms": "5"}},
			},
			// A broker key refused is INVALID_REQUEST, as Kafka 4.4.0 answered
			// side by side (interop/cmd/configcompare).
			errs: []error{nil, nil, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest},
		},
		{
			// segment.bytes' 1 MiB floor, and internal.segment.bytes for smaller
			// segments (Kafka 4.4.0 side by side: 1048575 INVALID_CONFIG for a
			// topic, 1000 INVALID_REQUEST for log.segment.bytes).
			name: "segment sizes",
			reqs: []AlterConfigsResource{
				{Type: metadata.ResourceTopic, Name: "orders", Configs: map[string]string{"segment.bytes": "1048575"}},
				{Type: metadata.ResourceBroker, Name: "", Configs: map[string]string{"log.segment.bytes": "1000"}},
				{Type: metadata.ResourceBroker, Name: "1", Configs: map[string]string{"log.segment.bytes": "1048576"}},
			},
			errs: []error{metadata.ErrInvalidConfig, metadata.ErrInvalidRequest, nil},
		},
		{
			name: "unsupported type and duplicates",
			reqs: []AlterConfigsResource{
				{Type: 3, Name: "g"},
				{Type: metadata.ResourceTopic, Name: "orders"},
				{Type: metadata.ResourceTopic, Name: "orders"},
			},
			errs: []error{metadata.ErrInvalidRequest, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, res := PlanAlterConfigs(base, tt.reqs, true)
			checkConfigResults(t, res, tt.errs)
			img := apply(t, base, recs...)
			if tt.want != nil {
				if got := img.Topic("orders").Overrides; !maps.Equal(got, tt.want) {
					t.Errorf("overrides = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestPlanIncrementalAlterConfigs(t *testing.T) {
	base := configBase(t)
	topic := func(ops ...AlterConfigOp) []IncrementalAlterConfigsResource {
		return []IncrementalAlterConfigsResource{{Type: metadata.ResourceTopic, Name: "orders", Ops: ops}}
	}
	tests := []struct {
		name    string
		img     *metadata.Image
		reqs    []IncrementalAlterConfigsResource
		errs    []error
		want    map[string]string
		records int
	}{
		{
			name: "set and delete",
			reqs: topic(AlterConfigOp{Key: "segment.ms", Op: OpSet, Value: "60000"}, AlterConfigOp{Key: "retention.ms", Op: OpDelete}),
			errs: []error{nil}, records: 2,
			want: map[string]string{"segment.ms": "60000", "cleanup.policy": "compact,delete"},
		},
		{
			name: "deleting an absent key and setting the same value change nothing",
			reqs: topic(AlterConfigOp{Key: "segment.ms", Op: OpDelete}, AlterConfigOp{Key: "retention.ms", Op: OpSet, Value: "1000"}),
			errs: []error{nil}, records: 0,
		},
		{
			name: "replication throttles: set, cleared when absent, invalid lists refused, the log-dir throttle's delete ignored",
			reqs: []IncrementalAlterConfigsResource{
				{Type: metadata.ResourceTopic, Name: "orders", Ops: []AlterConfigOp{
					{Key: "leader.replication.throttled.replicas", Op: OpSet, Value: "0:1,0:2"},
					{Key: "follower.replication.throttled.replicas", Op: OpDelete}}},
				{Type: metadata.ResourceBroker, Name: "1", Ops: []AlterConfigOp{
					{Key: "follower.replication.throttled.rate", Op: OpSet, Value: "1048576"},
					{Key: "leader.replication.throttled.rate", Op: OpDelete},
					{Key: "replica.alter.log.dirs.io.max.bytes.per.second", Op: OpDelete}}},
				{Type: metadata.ResourceBroker, Name: "2", Ops: []AlterConfigOp{{Key: "leader.replication.throttled.rate", Op: OpSet, Value: "-1"}}},
				{Type: metadata.ResourceBroker, Name: "3", Ops: []AlterConfigOp{{Key: "replica.alter.log.dirs.io.max.bytes.per.second", Op: OpSet, Value: "1"}}},
			},
			errs: []error{nil, nil, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest}, records: 2,
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete", "leader.replication.throttled.replicas": "0:1,0:2"},
		},
		{
			name: "a throttled-replicas list must be * or partition:broker items",
			reqs: topic(AlterConfigOp{Key: "follower.replication.throttled.replicas", Op: OpSet, Value: "0:1,*"}),
			errs: []error{metadata.ErrInvalidConfig}, records: 0,
		},
		{
			name: "subtract from a list",
			reqs: topic(AlterConfigOp{Key: "cleanup.policy", Op: OpSubtract, Value: "delete"}),
			errs: []error{nil}, records: 1,
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"},
		},
		{
			name: "append to the inherited default",
			img:  withTopic(t, clusterImage(t, 1), "orders", idOrders, nil, []int32{1}),
			reqs: topic(AlterConfigOp{Key: "cleanup.policy", Op: OpAppend, Value: "compact"}),
			errs: []error{nil}, records: 1,
			want: map[string]string{"cleanup.policy": "delete,compact"},
		},
		{
			// As Kafka's controller: a key the resource does not set starts
			// from the built-in default, whatever the cluster-wide value.
			name: "append starts from the built-in default, not the cluster default",
			img: apply(t, withTopic(t, clusterImage(t, 1), "orders", idOrders, nil, []int32{1}),
				&metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Key: "log.cleanup.policy", Value: "compact"}),
			reqs: topic(AlterConfigOp{Key: "cleanup.policy", Op: OpAppend, Value: "compact"}),
			errs: []error{nil}, records: 1,
			want: map[string]string{"cleanup.policy": "delete,compact"},
		},
		{
			// An empty cleanup.policy is valid in Kafka (neither delete nor
			// compact), so subtracting every item is taken.
			name: "subtracting everything leaves an empty list",
			reqs: topic(AlterConfigOp{Key: "cleanup.policy", Op: OpSubtract, Value: "delete,compact"}),
			errs: []error{nil}, records: 1,
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": ""},
		},
		{
			name: "append to a non-list",
			reqs: topic(AlterConfigOp{Key: "retention.ms", Op: OpAppend, Value: "1"}),
			errs: []error{metadata.ErrInvalidConfig},
		},
		{
			name: "bad value, unknown key, unknown op, repeated key",
			reqs: []IncrementalAlterConfigsResource{
				{Type: metadata.ResourceTopic, Name: "orders", Ops: []AlterConfigOp{{Key: "retention.ms", Value: "x"}}},
				{Type: metadata.ResourceBroker, Name: "", Ops: []AlterConfigOp{{Key: "no.such", Value: "1"}}},
				{Type: metadata.ResourceBroker, Name: "1", Ops: []AlterConfigOp{{Key: "log.retention.ms", Op: 7, Value: "1"}}},
				{Type: metadata.ResourceBroker, Name: "2", Ops: []AlterConfigOp{{Key: "log.retention.ms", Value: "1"}, {Key: "log.retention.ms", Op: OpDelete}}},
			},
			errs: []error{metadata.ErrInvalidConfig, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest, metadata.ErrInvalidRequest},
		},
		{
			name: "internal.segment.bytes below segment.bytes' floor",
			reqs: topic(AlterConfigOp{Key: metadata.TopicInternalSegmentBytes, Value: "4096"}, AlterConfigOp{Key: "segment.bytes", Value: "1048576"}),
			errs: []error{nil}, records: 2,
		},
		{
			name: "segment.bytes below 1 MiB",
			reqs: topic(AlterConfigOp{Key: "segment.bytes", Value: "1000"}),
			errs: []error{metadata.ErrInvalidConfig},
		},
		{
			name: "broker cluster default",
			reqs: []IncrementalAlterConfigsResource{{Type: metadata.ResourceBroker, Ops: []AlterConfigOp{
				{Key: "log.segment.bytes", Op: OpDelete}, {Key: "log.retention.ms", Op: OpSet, Value: "7"}}}},
			errs: []error{nil}, records: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := tt.img
			if img == nil {
				img = base
			}
			recs, res := PlanIncrementalAlterConfigs(img, tt.reqs, true)
			checkConfigResults(t, res, tt.errs)
			if countNil(tt.errs) == len(tt.errs) && len(recs) != tt.records {
				t.Errorf("%d records, want %d: %v", len(recs), tt.records, recs)
			}
			img = apply(t, img, recs...)
			if tt.want != nil {
				if got := img.Topic("orders").Overrides; !maps.Equal(got, tt.want) {
					t.Errorf("overrides = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func checkConfigResults(t *testing.T, res []ConfigResult, errs []error) {
	t.Helper()
	if len(res) != len(errs) {
		t.Fatalf("%d results, want %d", len(res), len(errs))
	}
	for i, r := range res {
		if !errors.Is(r.Err, errs[i]) || (r.Err == nil) != (errs[i] == nil) {
			t.Errorf("result %d (%v %q): err = %v, want %v", i, r.Type, r.Name, r.Err, errs[i])
		}
	}
}
