package cli

import (
	"strings"

	"github.com/strata-stream/strata/internal/admin"
)

// ParseKeyValue splits "key=value" at the first '=' (the value may hold more '='
// and may be empty; the key may not). flag names the flag in errors.
func ParseKeyValue(flag, s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return "", "", Usagef("%s: %q is not key=value", flag, s)
	}
	return key, value, nil
}

// ParseOffsetSpec parses the value of flag (named in a usage error) as an
// admin.OffsetSpec.
func ParseOffsetSpec(flag, s string) (admin.OffsetSpec, error) {
	spec, err := admin.ParseOffsetSpec(s)
	if err != nil {
		return admin.OffsetSpec{}, Usagef("%s: %v", flag, err)
	}
	return spec, nil
}
