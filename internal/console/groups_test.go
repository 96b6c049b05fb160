package console

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/admin"
)

// TestGroupLagTotals: the groups list (summarize) and the group page and its
// lag JSON (lagOf) show one total lag, over the partitions whose lag is
// known, whatever the others hold: -1 (unknown), another negative value, or a
// lag read with an error, which the HTTP API shows as null and leaves out of
// its total too. The list counts those partitions as unknown.
func TestGroupLagTotals(t *testing.T) {
	part := func(lag int64, err error) admin.PartitionView {
		return admin.PartitionView{Topic: "t", Committed: -1, End: -1, Lag: lag, Err: err}
	}
	for _, tt := range []struct {
		name    string
		offsets []admin.PartitionView
		total   int64
		unknown int
	}{
		{"none", nil, 0, 0},
		{"all known", []admin.PartitionView{part(3, nil), part(0, nil), part(4, nil)}, 7, 0},
		{"one unknown", []admin.PartitionView{part(3, nil), part(-1, kerr.NotLeaderForPartition)}, 3, 1},
		{"end behind start", []admin.PartitionView{part(-2, nil), part(4, nil)}, 4, 1},
		{"lag with an error", []admin.PartitionView{part(5, kerr.UnknownTopicOrPartition), part(2, nil)}, 2, 1},
		{"all unknown", []admin.PartitionView{part(-1, kerr.NotLeaderForPartition), part(-1, kerr.NotLeaderForPartition)}, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := admin.GroupView{Group: "g", State: "Empty", Offsets: tt.offsets}
			var listed groupSummary
			summarize(&listed, v)
			rows, total := lagOf(v)
			if listed.Lag != tt.total || listed.LagUnknown != tt.unknown || listed.Partitions != len(tt.offsets) {
				t.Errorf("groups list: lag %d, %d unknown of %d partitions; want %d, %d unknown of %d",
					listed.Lag, listed.LagUnknown, listed.Partitions, tt.total, tt.unknown, len(tt.offsets))
			}
			if total != tt.total || len(rows) != len(tt.offsets) {
				t.Errorf("group page: total %d over %d rows; want %d over %d", total, len(rows), tt.total, len(tt.offsets))
			}
		})
	}
}
