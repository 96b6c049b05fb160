package httpapi_test

import (
	"net/http"
	"testing"
)

type sharePolled struct {
	Records []struct {
		Partition     int32  `json:"partition"`
		Offset        int64  `json:"offset"`
		Key           string `json:"key"`
		DeliveryCount int16  `json:"delivery_count"`
		Headers       []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"headers"`
	} `json:"records"`
}

// TestSharePollAndAck: a share poll acquires records with their delivery counts;
// /ack accepts, releases (the record comes back with delivery_count 2) and rejects;
// acknowledging a record the consumer does not hold is a 409 INVALID_RECORD_STATE,
// an unknown result a 400; a rejected record lands in the group's dead-letter topic.
func TestSharePollAndAck(t *testing.T) {
	n := sharedNode(t)
	n.createTopic("share-jobs", 1)
	n.must(http.StatusCreated, "POST", "/topics", map[string]any{"topic": "dlq.share-jobs", "partitions": 1,
		"configs": map[string]string{"errors.deadletterqueue.group.enable": "true"}})
	n.must(http.StatusBadRequest, "POST", "/groups/share-workers/configs", map[string]any{"configs": map[string]string{
		"errors.deadletterqueue.topic.name": "share-jobs"}}) // no dlq. prefix
	n.must(http.StatusOK, "POST", "/groups/share-workers/configs", map[string]any{"configs": map[string]string{
		"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": "dlq.share-jobs"}})
	for _, k := range []string{"a", "b", "c"} {
		n.must(http.StatusOK, "POST", "/produce", map[string]any{"topic": "share-jobs", "key": k, "value": 1})
	}

	var got sharePolled
	n.must(http.StatusOK, "POST", "/poll", map[string]any{"group": "share-workers", "topic": "share-jobs", "share": true, "timeout_ms": 20000}).json(t, &got)
	if len(got.Records) != 3 {
		t.Fatalf("share poll: %d records, want 3: %+v", len(got.Records), got)
	}
	for i, r := range got.Records {
		if r.Offset != int64(i) || r.DeliveryCount != 1 {
			t.Errorf("record %d: %+v, want offset %d at delivery 1", i, r, i)
		}
	}
	ack := func(status int, offset int64, result string) response {
		return n.must(status, "POST", "/ack", map[string]any{"group": "share-workers", "topic": "share-jobs", "partition": 0, "offset": offset, "result": result})
	}
	if c := ack(http.StatusBadRequest, 0, "maybe").errorCode(t); c != "INVALID_REQUEST" {
		t.Errorf("unknown result: code %s", c)
	}
	var ok struct{ Acknowledged bool }
	ack(http.StatusOK, 0, "accept").json(t, &ok)
	if !ok.Acknowledged {
		t.Error(`accept: want {"acknowledged":true}`)
	}
	ack(http.StatusOK, 1, "release")
	ack(http.StatusOK, 2, "reject")
	for _, o := range []int64{0, 2, 7} {
		if c := ack(http.StatusConflict, o, "accept").errorCode(t); c != "INVALID_RECORD_STATE" {
			t.Errorf("offset %d not held: code %s", o, c)
		}
	}
	// Another consumer holds nothing.
	r := n.must(http.StatusConflict, "POST", "/ack", map[string]any{"group": "share-workers", "consumer": "other", "topic": "share-jobs",
		"partition": 0, "offset": 1, "result": "accept"})
	if c := r.errorCode(t); c != "INVALID_RECORD_STATE" {
		t.Errorf("unknown consumer: code %s", c)
	}

	// The released record comes back.
	n.must(http.StatusOK, "POST", "/poll", map[string]any{"group": "share-workers", "topic": "share-jobs", "share": true, "timeout_ms": 20000}).json(t, &got)
	if len(got.Records) != 1 || got.Records[0].Offset != 1 || got.Records[0].DeliveryCount != 2 {
		t.Fatalf("second share poll: %+v, want offset 1 at delivery 2", got)
	}
	ack(http.StatusOK, 1, "accept")

	// A consumer-group poll of the dead-letter topic reads the rejected record.
	var dlq sharePolled
	n.must(http.StatusOK, "POST", "/poll", map[string]any{"group": "share-audit", "topic": "dlq.share-jobs", "timeout_ms": 20000}).json(t, &dlq)
	if len(dlq.Records) != 1 {
		t.Fatalf("dead-letter topic: %+v, want the rejected record", dlq)
	}
	h := map[string]string{}
	for _, x := range dlq.Records[0].Headers {
		h[x.Key] = x.Value
	}
	if h["__dlq.errors.topic"] != "share-jobs" || h["__dlq.errors.offset"] != "2" || h["__dlq.errors.group"] != "share-workers" {
		t.Errorf("dead-letter headers %v", h)
	}

	// A share consumer cannot poll as a consumer-group member, nor the reverse.
	if c := n.must(http.StatusConflict, "POST", "/poll", map[string]any{"group": "share-workers", "topic": "share-jobs", "timeout_ms": 0}).errorCode(t); c != "CONSUMER_KIND_MISMATCH" {
		t.Errorf("consumer-group poll of a share consumer: code %s", c)
	}
	n.must(http.StatusOK, "POST", "/poll", map[string]any{"group": "share-classic", "topic": "share-jobs", "timeout_ms": 0})
	if c := n.must(http.StatusConflict, "POST", "/poll", map[string]any{"group": "share-classic", "topic": "share-jobs", "share": true}).errorCode(t); c != "CONSUMER_KIND_MISMATCH" {
		t.Errorf("share poll of a consumer-group consumer: code %s", c)
	}
	n.must(http.StatusOK, "DELETE", "/groups/share-classic/consumers/default", nil)
	n.must(http.StatusOK, "DELETE", "/groups/share-workers/consumers/default", nil)
}
