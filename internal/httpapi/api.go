package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/api"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// Cluster is the node's view of the cluster metadata.
type Cluster interface {
	Image() *metadata.Image
}

// Partitions are the partitions hosted on this node (a *replica.Manager).
type Partitions interface {
	Partition(topic string, index int32) (*replica.Partition, error)
}

// Observer sees the records the API appends locally, as the Kafka handlers report
// theirs (handlers.Observer.Produced), so metrics count both front doors.
type Observer interface {
	Produced(topic string, partition int32, bytes, records int64)
}

// RequestObserver sees every request an API route serves (metrics: counts,
// durations and requests in flight per route). HTTPRequestStarted is called as a
// request reaches its route, before authentication; done with the status sent.
type RequestObserver interface {
	HTTPRequestStarted(route string) (done func(status int))
}

// Config configures the API of one node.
type Config struct {
	// KafkaAddr is the node's Kafka listener: the embedded clients' seed broker.
	KafkaAddr string
	// AdvertisedAddr is host:port of this node's HTTP API as the other nodes reach
	// it: requests for a consumer instance held by another node are forwarded there.
	// Empty turns forwarding off.
	AdvertisedAddr string
	// ClientOpts are added to every embedded Kafka client: the TLS and SASL the
	// node's own clients use on its Kafka listener.
	ClientOpts []kgo.Opt
	// ForwardTLS, when set, is the client TLS configuration for forwarding
	// requests to other nodes' HTTP APIs (https); nil forwards over http.
	ForwardTLS *tls.Config
	// Cluster is the metadata image this node follows (topics, partitions, leaders).
	Cluster Cluster
	// Partitions, when set, lets produce append directly to the partitions this node
	// leads; nil sends every record through the Kafka listener.
	Partitions Partitions
	// Observer, when set, is told about local appends.
	Observer Observer
	// Requests, when set, is told about every request a route serves.
	Requests RequestObserver
	// Logger; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (default 16 MiB).
	MaxBodyBytes int64
	// MaxConsumers bounds the consumer instances kept at once (default 1000).
	MaxConsumers int
	// DefaultSessionTimeout is the group session timeout of a consumer instance whose
	// first poll names none, and so how long an idle instance lives (default 45s).
	DefaultSessionTimeout time.Duration
	// WaitTimeout bounds how long a topic change waits to show in this node's
	// metadata image before the answer is sent anyway (default 10s).
	WaitTimeout time.Duration
	// Guard, when set, authenticates and authorizes every request (access.go);
	// nil serves everyone, as without security.
	Guard *httpauth.Guard
	// TopicWait bounds how long a request naming a topic this node's image does
	// not have waits for it (default 500ms): a topic created through another
	// node reaches this one's image a moment after that node answered.
	TopicWait time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 16 << 20
	}
	if c.MaxConsumers <= 0 {
		c.MaxConsumers = 1000
	}
	if c.DefaultSessionTimeout <= 0 {
		c.DefaultSessionTimeout = 45 * time.Second
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = 10 * time.Second
	}
	if c.TopicWait <= 0 {
		c.TopicWait = 500 * time.Millisecond
	}
	return c
}

// API serves the HTTP/JSON API of one node. Create it with New once the node's
// Kafka listener accepts connections, mount it with Register, and Close it before
// the Kafka listener stops (its consumer instances leave their groups through it).
type API struct {
	cfg       Config
	log       *slog.Logger
	admin     *kadm.Client
	adminCl   *kgo.Client
	producers producers
	consumers consumers
	// forwarder replays requests for consumer instances held by other nodes.
	forwarder *http.Client
	// members lists a group's members, to find the node holding an instance
	// (groupMembers; tests replace it).
	members memberLister
	// spread picks the partition of records with neither key nor partition: one
	// counter for every topic, each such record going to the next partition of its
	// topic (counter modulo the partition count).
	spread atomic.Uint32
	closed sync.Once
}

// New returns the API of a node.
func New(cfg Config) (*API, error) {
	cfg = cfg.withDefaults()
	if cfg.KafkaAddr == "" || cfg.Cluster == nil {
		return nil, errors.New("httpapi: Config needs KafkaAddr and Cluster")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.KafkaAddr), kgo.ClientID("strata-http-admin"),
		kgo.MetadataMinAge(250 * time.Millisecond)}, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("httpapi: admin client: %w", err)
	}
	a := &API{cfg: cfg, log: cfg.Logger, adminCl: cl, admin: kadm.NewClient(cl),
		forwarder: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.ForwardTLS}}}
	a.members = a.groupMembers
	a.producers.init(cfg)
	a.consumers.init(cfg)
	return a, nil
}

// route is one endpoint. The table is the single registry: Register mounts it and
// the tests hold it against the OpenAPI document.
type route struct {
	method, pattern string
	serve           func(*API, http.ResponseWriter, *http.Request)
}

var routes = []route{
	{"GET", "/openapi.json", (*API).serveOpenAPI},
	{"POST", "/produce", (*API).handleProduce},
	{"POST", "/topics/{topic}/records", (*API).handleProduceBatch},
	{"GET", "/poll", (*API).handlePoll},
	{"POST", "/poll", (*API).handlePoll},
	{"POST", "/commit", (*API).handleCommit},
	{"POST", "/ack", (*API).handleAck},
	{"POST", "/groups/{group}/seek", (*API).handleSeek},
	{"POST", "/groups/{group}/configs", (*API).handleSetGroupConfigs},
	{"DELETE", "/groups/{group}/consumers/{consumer}", (*API).handleCloseConsumer},
	{"GET", "/groups", (*API).handleListGroups},
	{"GET", "/groups/{group}", (*API).handleDescribeGroup},
	{"POST", "/topics", (*API).handleCreateTopic},
	{"GET", "/topics", (*API).handleListTopics},
	{"GET", "/topics/{topic}", (*API).handleDescribeTopic},
	{"DELETE", "/topics/{topic}", (*API).handleDeleteTopic},
}

// Register mounts every endpoint on mux, and for each path a 405 in the API's
// error format for the methods it does not serve (net/http's is plain text). A
// path under the API's own path space (the first segment of a route: /topics/...,
// /groups/...) that no route serves is a 404 in the API's format too; the rest of
// mux's paths (the console, health, the root) keep their answers.
func (a *API) Register(mux *http.ServeMux) {
	allowed := map[string][]string{}
	subtrees := map[string]bool{}
	for _, rt := range routes {
		allowed[rt.pattern] = append(allowed[rt.pattern], rt.method)
		if rt.method == http.MethodGet {
			allowed[rt.pattern] = append(allowed[rt.pattern], http.MethodHead)
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(rt.pattern, "/"), "/")
		subtrees["/"+first+"/"] = true
	}
	for subtree := range subtrees {
		mux.HandleFunc(subtree, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, errorf(http.StatusNotFound, codeNotFound, "%s %s: no such path in the API", r.Method, r.URL.Path))
		})
	}
	for pattern, methods := range allowed {
		slices.Sort(methods)
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "%s %s: not served; allowed: %s", r.Method, pattern, allow))
		})
	}
	for _, rt := range routes {
		mux.Handle(rt.method+" "+rt.pattern, a.observed(rt, sameOrigin(rt, a.guarded(rt, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rt.serve(a, w, r)
		})))))
	}
}

// Admin is the API's admin client on the node's Kafka listener, for the node's
// other non-Kafka front doors (the console); it closes with the API.
func (a *API) Admin() *kadm.Client { return a.admin }

// Close closes every consumer instance and the embedded clients. Each instance
// leaves its group, waiting at most until ctx is done. Requests still running fail
// with 503.
func (a *API) Close(ctx context.Context) {
	a.closed.Do(func() {
		a.consumers.close(ctx)
		a.producers.close()
		a.adminCl.Close()
	})
}

func (a *API) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
}

// observed reports each request of rt to Config.Requests, with the status sent
// (200 when the handler wrote none).
func (a *API) observed(rt route, h http.Handler) http.Handler {
	if a.cfg.Requests == nil {
		return h
	}
	name := rt.method + " " + rt.pattern
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := a.cfg.Requests.HTTPRequestStarted(name)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { done(sw.status) }()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status a handler sends.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
