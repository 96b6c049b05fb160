package cli

import "strings"

// ParseKeyValue splits "key=value" at the first '=' (the value may hold more '='
// and may be empty; the key may not). flag names the flag in errors.
func ParseKeyValue(flag, s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return "", "", Usagef("%s: %q is not key=value", flag, s)
	}
	return key, value, nil
}
