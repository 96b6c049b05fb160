package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	n := startNode(t)
	n.createTopic("smoke", 2)
	r := n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "smoke", "key": "k", "value": map[string]any{"a": 1}})
	t.Logf("%v %s", time.Now().Format("05.000"), r.body)
	r = n.must(http.StatusOK, "POST", "/poll", map[string]any{"group": "g", "topic": "smoke", "timeout_ms": 5000})
	t.Logf("%v %s", time.Now().Format("05.000"), r.body)
	r = n.must(http.StatusOK, "POST", "/commit", map[string]any{"group": "g"})
	t.Logf("%v %s", time.Now().Format("05.000"), r.body)
	r = n.must(http.StatusOK, "GET", "/groups/g", nil)
	t.Logf("%v %s", time.Now().Format("05.000"), r.body)
	r = n.must(http.StatusOK, "GET", "/topics/smoke", nil)
	t.Logf("%v %s", time.Now().Format("05.000"), r.body)
}
