package metrics

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-stream/strata/internal/replica"
)

type noPartitions struct{}

func (noPartitions) Partitions() []*replica.Partition { return nil }

// exported lists every metric name this package can export, with the _bucket,
// _sum and _count series of histograms and summaries.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := New(Config{Cluster: stubCluster{img: testImage(t)}, Partitions: noPartitions{}, Groups: stubLag{}})
	ch := make(chan *prometheus.Desc, 256)
	for _, c := range []prometheus.Collector{m.net, m.dat, m.isr.shrinks, m.isr.expands, m.auth, m.httpAuth,
		partitionCollector{noPartitions{}}, clusterCollector{cluster: stubCluster{img: testImage(t)}}, lagCollector{groups: stubLag{}},
		shareCollector{}, m.disk.fsync, m.disk.roll, m.disk.fsyncErrors, m.fetches.requests, m.fetches.full,
		m.fetches.requestPartitions, m.fetches.responsePartitions, m.http.total, m.http.duration, m.http.inFlight, telemetryStats{}} {
		c.Describe(ch)
	}
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	names := map[string]bool{}
	for d := range ch {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("no name in %s", d)
		}
		names[match[1]] = true
	}
	for _, base := range []string{"strata_request_duration_seconds", "strata_log_fsync_seconds", "strata_http_request_duration_seconds"} {
		if !names[base] {
			t.Fatalf("%s is not exported", base)
		}
		names[base+"_count"], names[base+"_sum"] = true, true
	}
	names["strata_request_duration_seconds_bucket"] = true
	names["strata_http_request_duration_seconds_bucket"] = true
	return names
}

// TestDocsAndDashboardsNameRealMetrics keeps docs/observability.md, the Grafana
// dashboard and the alert rules in step with the code: every metric they name
// exists, and the doc describes every metric.
func TestDocsAndDashboardsNameRealMetrics(t *testing.T) {
	names := exported(t)
	mention := regexp.MustCompile(`strata_[a-z_]*[a-z]`)
	files := map[string]string{
		"doc":       "../../docs/observability.md",
		"dashboard": "../../deploy/grafana/strata-dashboard.json",
		"alerts":    "../../deploy/prometheus/strata-alerts.yml",
	}
	doc := ""
	for what, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if what == "doc" {
			doc = string(b)
		}
		for _, name := range mention.FindAllString(string(b), -1) {
			// Pushed client metrics (telemetry.go) are named by the client.
			if !names[name] && !strings.HasPrefix(name, "strata_client_org_apache_kafka_") {
				t.Errorf("%s (%s) names %s, which is not a metric", what, path, name)
			}
		}
	}
	var missing []string
	for name := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !strings.Contains(doc, "`"+base+"`") {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/observability.md does not describe %v", missing)
	}
}
