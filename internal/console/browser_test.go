package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// chromium finds the headless browser. Without one the browser tests fail in CI
// (CI=true; scripts/install-browser.sh installs it) and are skipped loudly
// elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI must run scripts/install-browser.sh")
	}
	t.Skip("SKIPPING BROWSER TESTS: chromium is not installed (run scripts/install-browser.sh)")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// screenshot saves the page as testdata/screenshots/<name>.png when
// STRATA_SCREENSHOTS is set (a gitignored directory: test artifacts).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("STRATA_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("testdata", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
}

// click clicks the element and waits for the page it leads to.
func click(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		t.Fatalf("click %s: %v", css, err)
	}
}

// text is an element's text content, trimmed.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

// js evaluates a JavaScript expression.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript condition in the page until it holds.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// TestBrowser drives every console page in headless Chromium against a live node
// with data and consumer groups: the overview, topics, creating a topic through
// the form, a topic's live figures and records, the groups list, a group's members
// and lag chart, and resetting offsets through the form (refused while the group
// has members).
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	n := startNode(t)
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for p, k := range []int{40, 25, 31} {
		produce(t, cl, "orders", int32(p), "order", k)
	}
	// billing: committed offsets and no members; dashboard: one live member.
	if err := adm.CommitAllOffsets(context.Background(), "billing", offsetsOf("orders", map[int32]int64{0: 10, 1: 25, 2: 1})); err != nil {
		t.Fatal(err)
	}
	member, _ := client(t, n, kgo.ConsumerGroup("dashboard"), kgo.ConsumeTopics("orders"), kgo.ClientID("dashboard-app"))
	go func() {
		for {
			if fs := member.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	base := "http://" + n.HTTPAddr() + "/console/"
	wait.For(t, "the dashboard group to be stable", func() bool {
		_, body := get(t, base+"groups/dashboard")
		return strings.Contains(body, `id="group-state">Stable<`) && strings.Contains(body, "orders</a>: 0, 1, 2")
	})

	navigate(t, ctx, "http://"+n.HTTPAddr()+"/") // leads to the console
	if got := text(t, ctx, "h1"); got != "Cluster" {
		t.Fatalf("/ shows %q", got)
	}
	if got := text(t, ctx, "#active-controller"); got != "node 1" {
		t.Fatalf("active controller %q", got)
	}
	if got := text(t, ctx, "#online-count"); got != "4" {
		t.Fatalf("online partitions %q, want orders' 3 and __consumer_offsets' 1", got)
	}
	if got := text(t, ctx, "#groups-count"); got != "2" {
		t.Fatalf("groups %q", got)
	}
	screenshot(t, ctx, "overview")

	click(t, ctx, `header nav a[href="/console/topics"]`)
	if got := text(t, ctx, `#topics tr[data-topic="orders"] td:nth-child(5)`); got != "96" {
		t.Fatalf("orders shows %q messages, want 96", got)
	}
	screenshot(t, ctx, "topics")

	// Create a topic through the form.
	click(t, ctx, "#create-topic")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#topic-name-input"), "payments"),
		chromedp.SetValue(chromedp.CSS("#partitions-input"), "4"),
		chromedp.SendKeys(chromedp.CSS("#configs-input"), "retention.ms=600000"),
	); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "create-topic")
	click(t, ctx, "#create-submit")
	if got := text(t, ctx, "#flash"); got != "Topic payments created." {
		t.Fatalf("flash after create: %q", got)
	}
	if got := js[int](t, ctx, `document.querySelectorAll("#partitions tbody tr").length`); got != 4 {
		t.Fatalf("new topic page lists %d partitions", got)
	}
	if got := text(t, ctx, "#configs"); !strings.Contains(got, "600000") {
		t.Fatalf("config overrides %q", got)
	}
	details, err := adm.ListTopics(context.Background(), "payments")
	if err != nil || len(details["payments"].Partitions) != 4 {
		t.Fatalf("payments through the Kafka API: %+v %v", details["payments"], err)
	}

	// A topic page refreshes itself: rates appear once two samples exist.
	navigate(t, ctx, base+"topics/orders")
	produce(t, cl, "orders", 0, "more", 10)
	waitJS(t, ctx, "the refreshed high watermark", `document.querySelector('#partitions tr[data-partition="0"] [data-field=highWatermark]').textContent === "50"`)
	waitJS(t, ctx, "a messages/s figure", `/^[0-9]+\.[0-9]$/.test(document.querySelector('#partitions tr[data-partition="1"] [data-field=messagesPerSecond]').textContent)`)
	screenshot(t, ctx, "topic")

	click(t, ctx, "#view-records")
	if got := js[int](t, ctx, `document.querySelectorAll("#records tbody tr[data-offset]").length`); got != 20 {
		t.Fatalf("records page shows %d records, want 20", got)
	}
	if got := text(t, ctx, `#records tr[data-offset="49"] td:nth-child(4)`); got != "more-9" {
		t.Fatalf("newest record value %q", got)
	}
	click(t, ctx, `#partition-tabs a[href*="partition=2"]`)
	if got := text(t, ctx, `#records tr[data-offset="30"] td:nth-child(4)`); got != "order-30" {
		t.Fatalf("partition 2's last record %q", got)
	}
	screenshot(t, ctx, "records")

	click(t, ctx, `header nav a[href="/console/groups"]`)
	if got := text(t, ctx, `#groups tr[data-group="billing"] [data-field=lag]`); got != "70" {
		t.Fatalf("billing lag %q, want (50-10)+(25-25)+(31-1) = 70", got)
	}
	if got := text(t, ctx, `#groups tr[data-group="dashboard"] td:nth-child(2)`); got != "Stable" {
		t.Fatalf("dashboard state %q", got)
	}
	screenshot(t, ctx, "groups")

	click(t, ctx, `#groups a[href="/console/groups/dashboard"]`)
	if got := text(t, ctx, "#members"); !strings.Contains(got, "dashboard-app") || !strings.Contains(got, "orders: 0, 1, 2") {
		t.Fatalf("members table %q", got)
	}

	// The lag chart samples every 2 s; produce in between so the line moves.
	navigate(t, ctx, base+"groups/billing")
	waitJS(t, ctx, "a first lag sample", `Number(document.getElementById("lag-chart").dataset.samples || 0) >= 1`)
	produce(t, cl, "orders", 1, "late", 15)
	waitJS(t, ctx, "the lag chart to rise", `document.getElementById("total-lag").textContent === "85"`)
	waitJS(t, ctx, "two points on the chart", `document.getElementById("lag-line").getAttribute("points").split(" ").length >= 2`)
	screenshot(t, ctx, "group")

	// Reset through the form: to the latest offsets, so the lag drops to 0.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#reset-latest"))); err != nil {
		t.Fatal(err)
	}
	click(t, ctx, "#reset-submit")
	if got := text(t, ctx, "#flash"); got != "Offsets of topic orders reset to latest." {
		t.Fatalf("flash after reset: %q", got)
	}
	waitJS(t, ctx, "lag 0 after the reset", `document.getElementById("total-lag").textContent === "0"`)
	screenshot(t, ctx, "group-reset")

	// A group with members refuses the reset, and the page says why.
	navigate(t, ctx, base+"groups/dashboard")
	click(t, ctx, "#reset-submit")
	if got := text(t, ctx, "#error"); !strings.Contains(got, "stop its consumers first") {
		t.Fatalf("reset of a live group: %q", got)
	}
}

// offsetsOf builds kadm offsets to commit for one topic.
func offsetsOf(topic string, offsets map[int32]int64) kadm.Offsets {
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	return os
}
