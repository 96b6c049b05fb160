package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-stream/strata/api"
	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/metadata"
)

// openAPI is the part of the OpenAPI document the tests hold the server to. A
// small JSON Schema checker (below) covers the keywords the document uses.
type openAPI struct {
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas map[string]any `json:"schemas"`
		// Responses holds the answers of no one operation: MethodNotAllowed, for
		// a method a documented path does not serve, and NotFound, for a path
		// under the API's that no operation has.
		Responses map[string]docResponse `json:"responses"`
	} `json:"components"`
}

type docResponse struct {
	Ref     string         `json:"$ref"`
	Headers map[string]any `json:"headers"`
	Content map[string]struct {
		Schema any `json:"schema"`
	} `json:"content"`
}

type operation struct {
	Parameters []struct {
		Name     string `json:"name"`
		In       string `json:"in"`
		Required bool   `json:"required"`
		Schema   any    `json:"schema"`
	} `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
		Content  map[string]struct {
			Schema any `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]docResponse `json:"responses"`
}

var (
	docOnce sync.Once
	doc     openAPI
	docErr  error
)

func loadDoc(t testing.TB) *openAPI {
	t.Helper()
	docOnce.Do(func() { docErr = json.Unmarshal(api.OpenAPI, &doc) })
	if docErr != nil {
		t.Fatalf("api/openapi.json: %v", docErr)
	}
	return &doc
}

// template finds the document's path template matching a request path.
func (d *openAPI) template(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for tmpl := range d.Paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		match := true
		for i := range ts {
			if !(strings.HasPrefix(ts[i], "{") && segs[i] != "") && ts[i] != segs[i] {
				match = false
				break
			}
		}
		if match {
			return tmpl, true
		}
	}
	return "", false
}

// maxChecked is the largest request body checkExchange checks.
const maxChecked = 1 << 20

// checkExchange holds one request and its answer to the document: the operation
// and the answer's status are documented, the answer's body matches the status's
// schema, a 2xx answer came for a request that matches the request schema, and a
// request that does not match it got a 4xx.
func checkExchange(t testing.TB, method, target string, reqBody []byte, r response) {
	t.Helper()
	d := loadDoc(t)
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, ok := d.template(u.Path)
	if !ok {
		if r.status != http.StatusNotFound {
			t.Fatalf("%s %s: path not in the OpenAPI document, answered %d: %s", method, u.Path, r.status, r.body)
		}
		d.checkAnswer(t, method, u.Path, d.Components.Responses["NotFound"], r)
		return
	}
	op, ok := d.Paths[tmpl][strings.ToLower(method)]
	if !ok {
		if r.status != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: method not in the OpenAPI document, answered %d: %s", method, tmpl, r.status, r.body)
		}
		d.checkAnswer(t, method, tmpl, d.Components.Responses["MethodNotAllowed"], r)
		return
	}
	resp, ok := op.Responses[fmt.Sprint(r.status)]
	if !ok {
		t.Fatalf("%s %s: status %d not documented: %s", method, tmpl, r.status, r.body)
	}
	d.checkAnswer(t, method, tmpl, resp, r)
	if len(reqBody) > maxChecked {
		return // a test of body limits: too big to be worth checking
	}
	reqErr := d.validateRequest(op, u.Query(), reqBody)
	success := r.status >= 200 && r.status < 300
	if success && reqErr != nil {
		t.Fatalf("%s %s: accepted a request the document rejects: %v\n%s", method, tmpl, reqErr, reqBody)
	}
	if reqErr != nil && (r.status < 400 || r.status >= 500) {
		t.Fatalf("%s %s: a request the document rejects (%v) got %d", method, tmpl, reqErr, r.status)
	}
}

// checkAnswer holds an answer to a documented response: its JSON body matches
// the schema, and each header the response declares is sent.
func (d *openAPI) checkAnswer(t testing.TB, method, tmpl string, resp docResponse, r response) {
	t.Helper()
	if resp.Ref != "" {
		name, _ := strings.CutPrefix(resp.Ref, "#/components/responses/")
		resp = d.Components.Responses[name]
	}
	if resp.Content == nil {
		t.Fatalf("%s %s: %d answer has no documented content: %s", method, tmpl, r.status, r.body)
	}
	if c, ok := resp.Content["application/json"]; ok {
		if err := d.validateJSON(c.Schema, r.body); err != nil {
			t.Fatalf("%s %s: %d answer does not match the document: %v\n%s", method, tmpl, r.status, err, r.body)
		}
	}
	for h := range resp.Headers {
		if r.header.Get(h) == "" {
			t.Fatalf("%s %s: %d answer lacks the documented header %s", method, tmpl, r.status, h)
		}
	}
}

func (d *openAPI) validateRequest(op operation, q url.Values, body []byte) error {
	declared := map[string]bool{}
	for _, p := range op.Parameters {
		if p.In != "query" {
			continue
		}
		declared[p.Name] = true
		vals, ok := q[p.Name]
		if !ok {
			if p.Required {
				return fmt.Errorf("query parameter %s is required", p.Name)
			}
			continue
		}
		for _, v := range vals {
			var inst any = v
			if typ, _ := p.Schema.(map[string]any)["type"].(string); typ == "integer" {
				inst = json.Number(v)
			}
			if err := d.validate(p.Schema, inst, p.Name); err != nil {
				return err
			}
		}
	}
	for name := range q {
		if !declared[name] {
			return fmt.Errorf("query parameter %s is not declared", name)
		}
	}
	if op.RequestBody == nil {
		return nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if !op.RequestBody.Required {
			return nil
		}
		return fmt.Errorf("a body is required")
	}
	return d.validateJSON(op.RequestBody.Content["application/json"].Schema, body)
}

func (d *openAPI) validateJSON(schema any, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON document")
	}
	return d.validate(schema, v, "$")
}

// validate checks v (decoded with UseNumber) against a JSON Schema using $ref,
// type, enum, properties, required, additionalProperties, items, minItems,
// minimum and maximum: the keywords api/openapi.json uses.
func (d *openAPI) validate(schema any, v any, at string) error {
	s, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: schema is not an object", at)
	}
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/components/schemas/")
		target, exists := d.Components.Schemas[name]
		if !found || !exists {
			return fmt.Errorf("%s: unresolved $ref %s", at, ref)
		}
		return d.validate(target, v, at)
	}
	if typ, ok := s["type"]; ok {
		var types []string
		switch tt := typ.(type) {
		case string:
			types = []string{tt}
		case []any:
			for _, x := range tt {
				types = append(types, x.(string))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
			return fmt.Errorf("%s: %s is not of type %v", at, show(v), types)
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return sameJSON(e, v) }) {
		return fmt.Errorf("%s: %s is not one of %v", at, show(v), enum)
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, req := range anySlice(s["required"]) {
			if _, ok := x[req.(string)]; !ok {
				return fmt.Errorf("%s: required property %s is missing", at, req)
			}
		}
		for k, val := range x {
			ps, ok := props[k]
			if !ok {
				switch addl := s["additionalProperties"].(type) {
				case bool:
					if !addl {
						return fmt.Errorf("%s: property %s is not allowed", at, k)
					}
					continue
				case map[string]any:
					ps = addl
				default:
					continue
				}
			}
			if err := d.validate(ps, val, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if mi, ok := s["minItems"].(float64); ok && float64(len(x)) < mi {
			return fmt.Errorf("%s: %d items, want at least %v", at, len(x), mi)
		}
		if items, ok := s["items"]; ok {
			for i, item := range x {
				if err := d.validate(items, item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		if lo, ok := s["minimum"].(float64); ok && f < lo {
			return fmt.Errorf("%s: %s below the minimum %v", at, x, lo)
		}
		if hi, ok := s["maximum"].(float64); ok && f > hi {
			return fmt.Errorf("%s: %s above the maximum %v", at, x, hi)
		}
	}
	return nil
}

func hasType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		f, err := x.Float64()
		return t == "integer" && err == nil && f == math.Trunc(f) && !strings.ContainsAny(x.String(), ".eE")
	}
	return false
}

func sameJSON(enum, v any) bool {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		e, isNum := enum.(float64)
		return err == nil && isNum && e == f
	}
	return reflect.DeepEqual(enum, v)
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOpenAPIMatchesRoutes: every operation of the document is routed and every
// route is documented, and each answers JSON with a documented status.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	d := loadDoc(t)
	var documented []string
	for path, ops := range d.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	routed := httpapi.Routes()
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Fatalf("document and routes differ:\ndocumented: %v\nrouted:     %v", documented, routed)
	}

	n := sharedNode(t)
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{topic}", "no-such-topic", "{group}", "no-such-group", "{consumer}", "nobody").Replace(path)
		var body any
		if method == http.MethodPost {
			body = "{}"
		}
		n.do(method, path, body) // checks JSON, a documented status and the schemas
	}
}

// TestSchemaChecker: the checker itself tells matching from non-matching bodies.
func TestSchemaChecker(t *testing.T) {
	d := loadDoc(t)
	produce := map[string]any{"$ref": "#/components/schemas/ProduceRequest"}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"topic":"t","value":{"a":1}}`, true},
		{`{"topic":"t","acks":"all","key":"k","headers":[{"key":"h","value":"v"}]}`, true},
		{`{"topic":"t","acks":2}`, false},
		{`{"value":1}`, false},
		{`{"topic":"t","partition":-1}`, false},
		{`{"topic":"t","partition":1.5}`, false},
		{`{"topic":"t","extra":true}`, false},
		{`{"topic":"t","headers":[{"value":"v"}]}`, false},
		{`[1]`, false},
		{`{"topic":`, false},
	} {
		err := d.validateJSON(produce, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
}

// noCluster is a metadata image without topics.
type noCluster struct{}

func (noCluster) Image() *metadata.Image { return metadata.NewImage() }

// serveRecorded sends one request to h and returns its answer.
func serveRecorded(h http.Handler, method, target string, body []byte) response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, bytes.NewReader(body)))
	return response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// TestOpenAPIListsEveryAnswer: the answers any route of a kind gives before its
// own logic runs are in the document: 413 REQUEST_TOO_LARGE from every operation
// that reads a body, and 405 METHOD_NOT_ALLOWED (components.responses, with
// Allow) for every method a documented path does not serve. The exchanges of
// the other tests cover the answers of each handler's own logic.
func TestOpenAPIListsEveryAnswer(t *testing.T) {
	a, err := httpapi.New(httpapi.Config{KafkaAddr: "127.0.0.1:1", Cluster: noCluster{}, MaxBodyBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	mux := http.NewServeMux()
	a.Register(mux)
	d := loadDoc(t)
	big := []byte(`{"topic":"` + strings.Repeat("x", 32) + `"}`)
	for tmpl, ops := range d.Paths {
		path := strings.NewReplacer("{topic}", "t", "{group}", "g", "{consumer}", "c").Replace(tmpl)
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			op, served := ops[strings.ToLower(method)]
			switch {
			case !served:
				r := serveRecorded(mux, method, path, nil)
				if r.status != http.StatusMethodNotAllowed {
					t.Errorf("%s %s: %d, want 405: %s", method, path, r.status, r.body)
				}
				checkExchange(t, method, path, nil, r)
			case op.RequestBody != nil:
				r := serveRecorded(mux, method, path, big)
				if r.status != http.StatusRequestEntityTooLarge {
					t.Errorf("%s %s with a body above the limit: %d, want 413: %s", method, path, r.status, r.body)
				}
				checkExchange(t, method, path, big, r)
			}
		}
	}
}

// TestUnknownAPIPathAnswersJSON: a path under the API's own path space (the
// first segments of its routes: /topics/..., /groups/..., /produce/...) that no
// route serves is the API's JSON 404 NOT_FOUND, on a node's assembled routes; the
// console's pages, the health routes and paths outside the API keep their own
// answers.
func TestUnknownAPIPathAnswersJSON(t *testing.T) {
	t.Parallel()
	n := sharedNode(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/topics/t/nope"},
		{"GET", "/topics/"},
		{"POST", "/topics/t/records/1"},
		{"GET", "/groups/g/nope"},
		{"DELETE", "/groups/g/consumers/c/x"},
		{"POST", "/produce/x"},
		{"GET", "/poll/"},
	} {
		r := n.do(tc.method, tc.path, nil)
		if r.status != http.StatusNotFound || r.errorCode(t) != "NOT_FOUND" {
			t.Errorf("%s %s: %d %s, want 404 NOT_FOUND", tc.method, tc.path, r.status, r.body)
		}
	}
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
	}{
		{"GET", "/console/no-such-page", http.StatusNotFound, "text/html"},
		{"GET", "/healthz", http.StatusOK, "text/plain"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "text/plain"},
		{"POST", "/", http.StatusMethodNotAllowed, "text/plain"},
		{"GET", "/no-such-page", http.StatusNotFound, "text/plain"},
	} {
		req, err := http.NewRequest(tc.method, n.base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != tc.status || !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("%s %s: %d %q, want %d %s", tc.method, tc.path, resp.StatusCode, ct, tc.status, tc.contentType)
		}
	}
}
