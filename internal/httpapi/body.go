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

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own response types reach here; they always marshal.
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{errorDetail{codeInternal, fmt.Sprintf("encoding the answer: %v", err)}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError answers err as {"error":{"code","message"}}.
func writeError(w http.ResponseWriter, err *apiError) {
	if err.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(err.retryAfter))
	}
	writeJSON(w, err.status, errorBody{errorDetail{err.code, err.message}})
}
