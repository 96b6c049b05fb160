package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// decodeJSON decodes one JSON document into v, strictly: unknown fields, a
// value of the wrong type and anything after the document are errors. An empty
// body decodes as {}.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, codeMalformedJSON, "data after the JSON document")
	}
	return nil
}

// jsonError tells malformed JSON from well-formed JSON of the wrong shape.
func jsonError(err error) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, codeMalformedJSON, "malformed JSON: %v", err)
	case errors.As(err, &typ):
		return invalid("%s: expected %s, got JSON %s", jsonPath(typ.Field), jsonKind(typ.Type), typ.Value)
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	// Unknown fields, bad base64 and the like: the JSON is fine, its content is not.
	return invalid("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonPath is the path of a field as the client wrote it: encoding/json names
// the fields of an embedded struct after the struct's Go name too
// ("recordJSON.partition"), which no JSON name of the API has (they are all lower
// case), so segments with an upper-case letter are dropped.
func jsonPath(field string) string {
	var path []string
	for seg := range strings.SplitSeq(field, ".") {
		if seg != "" && strings.ToLower(seg) == seg {
			path = append(path, seg)
		}
	}
	if len(path) == 0 {
		return "the body"
	}
	return strings.Join(path, ".")
}

// jsonKind is the JSON a Go type decodes from, for error messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return fmt.Sprintf("an integer from %d to %d", -1<<(t.Bits()-1), 1<<(t.Bits()-1)-1)
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// readBody reads a request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return nil, fromErr(err)
	}
	return b, nil
}

// writeJSON answers v with status and returns the error of writing it.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own response types reach here; they always marshal.
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{errorDetail{codeInternal, fmt.Sprintf("encoding the answer: %v", err)}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeError answers err as {"error":{"code","message"}}.
func writeError(w http.ResponseWriter, err *apiError) {
	if err.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(err.retryAfter))
	}
	writeJSON(w, err.status, errorBody{errorDetail{err.code, err.message}})
}

// decodeControl is decodeJSON for the bodies of every route but produce's, which
// are small: a key given twice in one object is refused too, not decoded with its
// last value. Produce bodies (up to MaxBodyBytes of records, values carried as
// written) skip this second pass over the tokens; docs/http.md says so.
func decodeControl(body []byte, v any) *apiError {
	if err := decodeJSON(body, v); err != nil {
		return err
	}
	if path, ok := duplicateKey(body); ok {
		return invalid("%s: given twice", path)
	}
	return nil
}

// duplicateKey finds the first key given twice in one object of a well-formed
// JSON document, as its path ("offsets[1].partition").
func duplicateKey(body []byte) (string, bool) {
	type frame struct {
		keys    map[string]bool // nil: an array
		key     string          // the object's current key
		wantKey bool            // the object's next string is a key
		index   int             // the array's current element
	}
	var stack []*frame
	// path is the location of the value being read in the innermost frame.
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.keys == nil {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	// valueDone moves the innermost frame past the value just read.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.keys == nil {
				f.index++
			} else {
				f.wantKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // the end, or malformed: decodeJSON has said so
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				f := stack[n-1]
				f.key, f.wantKey = t, false
				if f.keys[t] {
					return strconv.Quote(path()), true
				}
				f.keys[t] = true
				continue
			}
		}
		valueDone()
	}
}
