package httpapi

// Routes lists every endpoint as "METHOD pattern", for the OpenAPI test.
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.method + " " + rt.pattern
	}
	return out
}
