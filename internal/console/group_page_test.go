package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/console"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/wait"
)

// TestGroupPageProtocols: a running group, classic or KIP-848
// (group.protocol=consumer), whose one member owns both partitions of a topic
// and has committed on one. The group page shows it Stable with its protocol
// and the member's assignment, and the page, its lag JSON and the HTTP API's
// GET /groups/{group} show the same lag, on both partitions, the uncommitted
// one's counted from the log start. The console's own path (the
// coordinator's committed offsets) left the uncommitted partition out.
func TestGroupPageProtocols(t *testing.T) {
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, "clicks", 0, "a", 4)
	produce(t, cl, "clicks", 1, "b", 3)
	base := "http://" + n.HTTPAddr()
	want := []partitionLag{
		{Topic: "clicks", Partition: 0, Committed: 1, HighWatermark: 4, Lag: 3},
		{Topic: "clicks", Partition: 1, Committed: -1, HighWatermark: 3, Lag: 3},
	}
	for _, tt := range []struct {
		name, group, protocol string
		opts                  []kgo.Opt
	}{
		{"classic", "clicks-classic", "consumer / cooperative-sticky", nil},
		{"KIP-848", "clicks-848", "consumer / uniform", []kgo.Opt{kgo.ServerSideBalancer()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			consumer, _ := client(t, n, append(tt.opts, kgo.ConsumerGroup(tt.group), kgo.ConsumeTopics("clicks"),
				kgo.DisableAutoCommit(), kgo.ClientID("clicker"))...)
			var first *kgo.Record // clicks-0 at offset 0
			for read := 0; read < 7; {
				fs := consumer.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("poll: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if r.Partition == 0 && r.Offset == 0 {
						first = r
					}
				})
				read += fs.NumRecords()
			}
			if err := consumer.CommitRecords(ctx, first); err != nil {
				t.Fatalf("committing clicks-0 at 1: %v", err)
			}
			var body string
			wait.For(t, "the group page to show the member with both partitions", func() bool {
				var status int
				status, body = get(t, base+"/console/groups/"+tt.group)
				return status == http.StatusOK && strings.Contains(body, `id="group-state">Stable<`) &&
					strings.Contains(body, ">clicks</a>: 0, 1<")
			})
			mustContain(t, "group page", body, tt.protocol, "<td>clicker</td>", `id="total-lag">6<`,
				`data-partition="1">`, `<td class="num" data-field="committed">—</td>`)

			l, err := getLag(t, base, tt.group)
			if err != nil {
				t.Fatal(err)
			}
			if l.Total != 6 || !slices.Equal(l.Partitions, want) {
				t.Fatalf("lag JSON: total %d, %+v; want 6, %+v", l.Total, l.Partitions, want)
			}
			status, raw := get(t, base+"/groups/"+tt.group)
			var g struct {
				State string `json:"state"`
				Lag   int64  `json:"lag"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(raw), &g) != nil {
				t.Fatalf("GET /groups/%s: %d %s", tt.group, status, raw)
			}
			if g.State != "Stable" || g.Lag != l.Total {
				t.Fatalf("the HTTP API shows %s with lag %d, the console Stable with %d:\n%s", g.State, g.Lag, l.Total, raw)
			}
		})
	}
}

// TestGroupPageNotAConsumerGroup: a share group's page and lag name its type,
// and an unknown group's are 404s, as GET /groups/{group} answers them; the
// groups list shows it as a share group. The console's own path said "no
// group" of a share group.
func TestGroupPageNotAConsumerGroup(t *testing.T) {
	n, adm, ctx := nodeWithJobs(t)
	start := kadm.Offsets{}
	start.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0, LeaderEpoch: -1})
	// It creates the share group, once the share coordinator has loaded
	// (retriable errors until then).
	var err error
	wait.For(t, "the share coordinator to answer AlterShareGroupOffsets", func() bool {
		resps, e := adm.AlterShareGroupOffsets(ctx, "workers", start)
		if e == nil {
			e = resps.Error()
		}
		err = e
		var ke *kerr.Error
		return !errors.As(e, &ke) || !ke.Retriable
	})
	if err != nil {
		t.Fatalf("creating the share group: %v", err)
	}
	base := "http://" + n.HTTPAddr()
	for _, tt := range []struct{ path, want string }{
		{"/console/groups/workers", "is a share group, not a consumer group"},
		{"/console/api/groups/workers/lag", "is a share group, not a consumer group"},
		{"/console/groups/nope", "Unknown group"},
		{"/console/api/groups/nope/lag", `there is no group \"nope\"`},
	} {
		if status, body := get(t, base+tt.path); status != http.StatusNotFound || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s = %d, want %d with %q:\n%s", tt.path, status, http.StatusNotFound, tt.want, body)
		}
	}
	// The list names it with its type, and describing it does not fail the
	// list.
	_, body := get(t, base+"/console/groups")
	mustContain(t, "groups list", body, `data-group="workers"`, "share group")
	if strings.Contains(body, `id="error"`) {
		t.Errorf("the groups list shows an error:\n%s", body)
	}
}

// TestGroupPagesWithoutAdmin: a console built without an admin client answers
// a group's page, its lag and a reset with a 503 that says why. The reset
// used to dereference the nil client.
func TestGroupPagesWithoutAdmin(t *testing.T) {
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{&metadata.TopicRecord{Name: "orders", ID: metadata.UUID{9}}})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &changingController{}
	ctrl.img.Store(img.WithOffset(1))
	c := console.New(console.Config{NodeID: 1, Cluster: ctrl, Replicas: appliedReplicas{}, Logger: testLogger()})
	form := url.Values{"topic": {"orders"}, "to": {"earliest"}}
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/console/groups/g", nil),
		httptest.NewRequest(http.MethodGet, "/console/api/groups/g/lag", nil),
		httptest.NewRequest(http.MethodPost, "/console/groups/g/offsets", strings.NewReader(form.Encode())),
	} {
		t.Run(fmt.Sprintf("%s %s", req.Method, req.URL.Path), func(t *testing.T) {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := httptest.NewRecorder()
			c.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "without a Kafka admin client") {
				t.Fatalf("answered %d, want %d saying there is no admin client:\n%s", rec.Code, http.StatusServiceUnavailable, rec.Body)
			}
		})
	}
}

// TestGroupLinksEscapeTheID: a group id may hold any characters; the groups
// list links each group to its own page, and the page's offset reset posts to
// the group's, whatever its id says to a URL ("/", "?", "#", "%").
func TestGroupLinksEscapeTheID(t *testing.T) {
	n, adm, ctx := nodeWithJobs(t)
	base := "http://" + n.HTTPAddr()
	for _, id := range []string{"team/app", "a?b=1", "c#d", "e%41", "sp ace"} {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, id, o); err != nil {
			t.Fatalf("committing for %q: %v", id, err)
		}
		path := "/console/groups/" + url.PathEscape(id)
		_, list := get(t, base+"/console/groups")
		mustContain(t, "groups list", list, `href="`+path+`"`)
		status, page := get(t, base+path)
		if status != http.StatusOK {
			t.Fatalf("group %q: page %d:\n%s", id, status, page)
		}
		mustContain(t, "group page", page, `action="`+path+`/offsets"`)
	}
}
