package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/controllerlink"
	"github.com/strata-stream/strata/internal/httpauth"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// Cluster is the metadata side of the node (*controller.Controller).
type Cluster interface {
	Image() *metadata.Image
	LeaderID() int32
}

// Replicas are the partitions this node hosts (*replica.Manager).
type Replicas interface {
	Partition(topic string, index int32) (*replica.Partition, error)
	// WaitApplied waits until the hosted partitions reflect the image at offset.
	WaitApplied(ctx context.Context, offset uint64) error
}

// Config is what the console shows and changes.
type Config struct {
	NodeID    int32
	ClusterID string
	Cluster   Cluster
	// Controller is the node's path to the active controller, which makes the
	// console's changes (creating a topic) from any node. They are retried
	// for about ten seconds while the active controller changes
	// (controllerlink.Retry).
	Controller controllerlink.Transport
	Replicas   Replicas
	// Admin is a client of the cluster over the Kafka protocol, for what must
	// work from any node: the groups list, a group's page and lag, described
	// as `strata group describe` and the HTTP API describe it
	// (admin.GroupViews), and resetting its offsets. Without one, those pages
	// say so.
	Admin *kadm.Client
	// AdminTimeout bounds what one page asks of Admin, so that a broker
	// that does not answer cannot hold a page for the client's retries
	// (minutes); 0 means 10 s. The overview waits at most 2 s of it for the
	// number of groups, which it leaves out otherwise.
	AdminTimeout time.Duration
	Logger       *slog.Logger
	// Guard, when set, authenticates and authorizes every page (access.go); nil
	// serves everyone.
	Guard *httpauth.Guard
	// Now is the clock for rates; nil means time.Now.
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	cfg   Config
	log   *slog.Logger
	pages *pages
	rates *rateSampler
	mux   http.Handler
}

// Errors of the console's own inputs.
var (
	// errBadInput: a form or query value does not parse; the page says which.
	errBadInput = errors.New("bad input")
	// errNoAdmin: no admin client (Config.Admin), which a group's page, its
	// lag and resetting its offsets go through.
	errNoAdmin = errors.New("group pages are not available: this console was started without a Kafka admin client")
)

// New returns a console; it starts no goroutines.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AdminTimeout <= 0 {
		cfg.AdminTimeout = 10 * time.Second
	}
	if cfg.Controller != nil {
		// A change in flight while the active controller changes is sent again
		// to the new one, as the Kafka path's forwarding does.
		cfg.Controller = controllerlink.Retrying{Transport: cfg.Controller}
	}
	c := &Console{cfg: cfg, log: cfg.Logger, pages: parsePages(), rates: newRateSampler(time.Second)}
	mux := http.NewServeMux()
	for _, rt := range c.routes() {
		mux.Handle(rt.pattern, cfg.Guard.Wrap(access[rt.pattern], c.writeGuardError, rt.h))
	}
	c.mux = secureHeaders(http.NewCrossOriginProtection().Handler(mux))
	return c
}

// contentSecurityPolicy lets pages use only the console's own script, styles and
// JSON, post forms only to it, and never be framed: a framing page could lay
// the reset-offsets button under a click of its own.
const contentSecurityPolicy = "default-src 'self'; base-uri 'none'; object-src 'none'; form-action 'self'; frame-ancestors 'none'"

// secureHeaders sets the headers that keep browsers from framing the console's
// answers or guessing their types, on every answer.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// route is one page or endpoint; the table is the single registry of them.
type route struct {
	pattern string
	h       http.Handler
}

func (c *Console) routes() []route {
	return []route{
		{"GET /console/{$}", http.HandlerFunc(c.overview)},
		{"GET /console/topics", http.HandlerFunc(c.topics)},
		{"GET /console/new-topic", http.HandlerFunc(c.newTopicForm)},
		{"POST /console/topics", http.HandlerFunc(c.createTopic)},
		{"GET /console/topics/{topic}", http.HandlerFunc(c.topic)},
		{"GET /console/topics/{topic}/records", http.HandlerFunc(c.records)},
		{"GET /console/groups", http.HandlerFunc(c.groups)},
		{"GET /console/groups/{group}", http.HandlerFunc(c.group)},
		{"POST /console/groups/{group}/offsets", http.HandlerFunc(c.resetOffsets)},
		{"GET /console/api/topics/{topic}", http.HandlerFunc(c.topicJSON)},
		{"GET /console/api/groups/{group}/lag", http.HandlerFunc(c.lagJSON)},
		{"GET /console/static/", http.StripPrefix("/console/", staticFiles())},
		{"/console/", http.HandlerFunc(c.notFound)},
	}
}

// adminContext bounds a page's calls on Admin by AdminTimeout.
func (c *Console) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.AdminTimeout)
}

// adminErr says what an error of a call cut by AdminTimeout means.
func (c *Console) adminErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer from the cluster within %v (a broker may be down or unreachable): %w", c.cfg.AdminTimeout, err)
	}
	return err
}

// Config is the configuration the console was built with (to serve a variant of
// it, e.g. with a different Admin, in a test or a tool).
func (c *Console) Config() Config { return c.cfg }

// Handler serves every path under /console/; mount it at "/console/".
func (c *Console) Handler() http.Handler { return c.mux }

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.renderError(w, r, http.StatusNotFound, "Not found", "There is no console page at "+r.URL.Path+".")
}
