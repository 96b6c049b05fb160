// Package api holds Strata's checked-in interface descriptions. openapi.json is the
// OpenAPI 3.1 document of the HTTP/JSON API; internal/httpapi serves these bytes at
// /openapi.json and its tests hold the server to them.
package api

import _ "embed"

// OpenAPI is the OpenAPI document of the HTTP/JSON API.
//
//go:embed openapi.json
var OpenAPI []byte
