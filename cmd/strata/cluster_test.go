package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestClusterStatus(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "3")
	var st clusterStatusJSON
	mustJSON(t, &st, "cluster", "status")
	if st.ClusterID == "" || st.Controller != 1 || len(st.Brokers) != 1 || st.Brokers[0].ID != 1 {
		t.Fatalf("status %+v", st)
	}
	if st.Topics < 1 || st.Partitions < 3 || len(st.UnderReplicated) != 0 || len(st.Offline) != 0 {
		t.Fatalf("status counts %+v", st)
	}
	r := mustRun(t, "cluster", "status")
	for _, want := range []string{"Cluster ID:        " + st.ClusterID, "Active controller: 1", "Under-replicated:  0", "Offline:           0"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("status table lacks %q:\n%s", want, r.stdout)
		}
	}
	if !hasRow(r.stdout, "1", st.Brokers[0].Host+":"+strconv.Itoa(int(st.Brokers[0].Port)), "-", "active") {
		t.Fatalf("broker row missing:\n%s", r.stdout)
	}
}
