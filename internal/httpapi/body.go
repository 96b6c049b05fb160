package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return invalid("%s: expected %s, got JSON %s", field, typ.Type, typ.Value)
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	// Unknown fields, bad base64 and the like: the JSON is fine, its content is not.
	return invalid("%s", strings.TrimPrefix(err.Error(), "json: "))
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
