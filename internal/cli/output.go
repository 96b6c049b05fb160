package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Format is how a command prints its results (--output).
type Format int

const (
	// FormatTable is aligned columns for people.
	FormatTable Format = iota
	// FormatJSON is one JSON document per list/describe command, or one JSON object
	// per line for record streams (produce, consume).
	FormatJSON
)

// ParseFormat parses --output.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "table", "":
		return FormatTable, nil
	case "json":
		return FormatJSON, nil
	}
	return 0, Usagef("--output: %q is neither table nor json", s)
}

// Table writes aligned, space-separated columns. Call Flush at the end.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table with a header row (omitted when header is empty).
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.Row(toAny(header)...)
	}
	return t
}

// Row appends a row; each cell is printed with fmt's %v.
func (t *Table) Row(cells ...any) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		fmt.Fprint(&b, c)
	}
	b.WriteByte('\n')
	io.WriteString(t.tw, b.String())
}

// Flush writes out the aligned rows.
func (t *Table) Flush() error { return t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// WriteJSON writes v as an indented JSON document followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JoinInt32s formats broker ids as "1,2,3" ("-" when there are none).
func JoinInt32s(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}
