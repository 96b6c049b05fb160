package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-stream/strata/internal/cli"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the templates/<name>.html files, each rendered inside layout.html.
var pageNames = []string{"overview", "topics", "topic", "newtopic", "records", "groups", "group", "error"}

// pages holds one parsed template set per page.
type pages struct{ sets map[string]*template.Template }

func parsePages() *pages {
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		p.sets[name] = template.Must(template.New(name).Funcs(templateFuncs).
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return p
}

func staticFiles() http.Handler {
	sub, err := fs.Sub(staticFS, ".")
	if err != nil {
		panic(err) // embed.FS always has "."
	}
	return http.FileServerFS(sub)
}

// base is what every page shows in its frame.
type base struct {
	Title     string
	Nav       string // overview, topics or groups: the highlighted tab
	ClusterID string
	NodeID    int32
	Flash     string // a success message
	Error     string // a failure message
}

func (c *Console) base(title, nav string) base {
	return base{Title: title, Nav: nav, ClusterID: c.cfg.ClusterID, NodeID: c.cfg.NodeID}
}

// render executes a page into a buffer first, so a template error becomes a clean
// 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages.sets[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		c.log.Error("console: rendering page", "page", name, "err", err)
		http.Error(w, "console: rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type errorPage struct {
	base
	Heading, Message string
}

func (c *Console) renderError(w http.ResponseWriter, _ *http.Request, status int, heading, msg string) {
	c.render(w, status, "error", errorPage{base: c.base(heading, ""), Heading: heading, Message: msg})
}

var templateFuncs = template.FuncMap{
	"bytes":  humanBytes,
	"num":    func(n int64) string { return groupDigits(n) },
	"offset": offsetText,
	"rate":   rateText,
	"ids":    idList,
	"millis": millisText,
	// path escapes a name for one segment of a URL path: a group id may
	// hold "/", "?", "#" or "%", which html/template leaves as they are there.
	"path": url.PathEscape,
}

// humanBytes formats a size in binary units; negative means unknown.
func humanBytes(n int64) string {
	if n < 0 {
		return "—"
	}
	return cli.Bytes(n)
}

// groupDigits writes 1234567 as 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// offsetText shows an offset, or a dash when unknown (negative).
func offsetText(n int64) string {
	if n < 0 {
		return "—"
	}
	return groupDigits(n)
}

// rateText shows messages per second, or a dash until two samples exist.
func rateText(r rate) string {
	if !r.Known {
		return "—"
	}
	return strconv.FormatFloat(r.PerSecond, 'f', 1, 64)
}

func idList(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ", ")
}

// millisText shows a Kafka timestamp (Unix milliseconds) in UTC.
func millisText(ms int64) string {
	if ms < 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}
