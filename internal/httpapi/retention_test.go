package httpapi

import (
	"net/http"
	"testing"
)

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in, config, value string
	}{
		{"7d", "retention.ms", "604800000"},
		{"12h", "retention.ms", "43200000"},
		{"30m", "retention.ms", "1800000"},
		{"45s", "retention.ms", "45000"},
		{"1500ms", "retention.ms", "1500"},
		{"2w", "retention.ms", "1209600000"},
		{"0d", "retention.ms", "0"},
		{" 7 D ", "retention.ms", "604800000"},
		{"infinite", "retention.ms", "-1"},
		{"500MB", "retention.bytes", "500000000"},
		{"30mb", "retention.bytes", "30000000"},
		{"1GiB", "retention.bytes", "1073741824"},
		{"64KiB", "retention.bytes", "65536"},
		{"2TB", "retention.bytes", "2000000000000"},
		{"3tib", "retention.bytes", "3298534883328"},
		{"100B", "retention.bytes", "100"},
		{"1kb", "retention.bytes", "1000"},
	} {
		config, value, err := parseRetention(tc.in)
		if err != nil || config != tc.config || value != tc.value {
			t.Errorf("%q: %s=%s (%v), want %s=%s", tc.in, config, value, err, tc.config, tc.value)
		}
	}
	for _, bad := range []string{"", "7", "d", "7days", "1.5h", "-1d", "5x", "10 parsecs", "9223372036854775807d", "999999999999TiB", "MB", "7dd"} {
		if config, value, err := parseRetention(bad); err == nil || err.status != http.StatusBadRequest || err.code != codeInvalidRetention {
			t.Errorf("%q: %s=%s (%v), want INVALID_RETENTION", bad, config, value, err)
		}
	}
}
