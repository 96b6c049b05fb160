package cli

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FormatHelp documents the --format template language.
const FormatHelp = `template for each record, printed followed by a newline:
  %k key          %v value         %h headers as k=v,k=v
  %T topic        %p partition     %o offset
  %t timestamp (unix ms)           %d timestamp (RFC3339, UTC)
  %% a percent sign; \n newline, \t tab, \\ backslash
A missing (null) key or value prints as nothing.`

// RecordFormat is a compiled --format template.
type RecordFormat struct{ parts []formatPart }

// formatPart is literal text, or one verb when verb != 0.
type formatPart struct {
	lit  string
	verb byte
}

// ParseRecordFormat compiles a template; see FormatHelp.
func ParseRecordFormat(s string) (*RecordFormat, error) {
	f := &RecordFormat{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.parts = append(f.parts, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return nil, Usagef("--format: %q ends with a lone %c", s, c)
		}
		i++
		n := s[i]
		if c == '\\' {
			switch n {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, Usagef(`--format: unknown escape \%c (known: \n \t \\)`, n)
			}
			continue
		}
		switch n {
		case '%':
			lit.WriteByte('%')
		case 'k', 'v', 'h', 'T', 'p', 'o', 't', 'd':
			flush()
			f.parts = append(f.parts, formatPart{verb: n})
		default:
			return nil, Usagef("--format: unknown verb %%%c (known: %%k %%v %%h %%T %%p %%o %%t %%d %%%%)", n)
		}
	}
	flush()
	return f, nil
}

// Append appends r formatted by the template to dst (no trailing newline).
func (f *RecordFormat) Append(dst []byte, r *kgo.Record) []byte {
	for _, p := range f.parts {
		switch p.verb {
		case 0:
			dst = append(dst, p.lit...)
		case 'k':
			dst = append(dst, r.Key...)
		case 'v':
			dst = append(dst, r.Value...)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		case 'T':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 't':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'd':
			dst = r.Timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
		}
	}
	return dst
}

// RecordJSON is one consumed record as consume --output json prints it (one object
// per line). Keys, values and header values are strings when they are UTF-8, else
// base64 with the matching *_encoding field set to "base64"; null stays null.
type RecordJSON struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Timestamp     time.Time    `json:"timestamp"`
	Key           *string      `json:"key"`
	KeyEncoding   string       `json:"key_encoding,omitempty"`
	Value         *string      `json:"value"`
	ValueEncoding string       `json:"value_encoding,omitempty"`
	Headers       []HeaderJSON `json:"headers"`
}

// HeaderJSON is one record header in RecordJSON.
type HeaderJSON struct {
	Key           string  `json:"key"`
	Value         *string `json:"value"`
	ValueEncoding string  `json:"value_encoding,omitempty"`
}

// NewRecordJSON converts a record for printing.
func NewRecordJSON(r *kgo.Record) RecordJSON {
	j := RecordJSON{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UTC(),
		Headers:   make([]HeaderJSON, len(r.Headers)),
	}
	j.Key, j.KeyEncoding = jsonBytes(r.Key)
	j.Value, j.ValueEncoding = jsonBytes(r.Value)
	for i, h := range r.Headers {
		j.Headers[i].Key = h.Key
		j.Headers[i].Value, j.Headers[i].ValueEncoding = jsonBytes(h.Value)
	}
	return j
}

// jsonBytes is b as a JSON-safe string and its encoding ("" for plain UTF-8).
func jsonBytes(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, "base64"
}
