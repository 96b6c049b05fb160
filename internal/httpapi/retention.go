package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
)

// retentionUnits are the suffixes a retention may end with: durations become
// retention.ms, sizes retention.bytes. Sizes with a B are decimal (KB = 1000
// bytes), with iB binary (KiB = 1024 bytes). Units are case-insensitive; every
// size unit ends in B, so "30m" is thirty minutes and "30mb" thirty megabytes.
var retentionUnits = []struct {
	suffix string
	config string
	scale  int64
}{
	// Longest suffixes first, so "ms" is not read as "s" and "KiB" not as "B".
	{"kib", "retention.bytes", 1 << 10},
	{"mib", "retention.bytes", 1 << 20},
	{"gib", "retention.bytes", 1 << 30},
	{"tib", "retention.bytes", 1 << 40},
	{"kb", "retention.bytes", 1e3},
	{"mb", "retention.bytes", 1e6},
	{"gb", "retention.bytes", 1e9},
	{"tb", "retention.bytes", 1e12},
	{"ms", "retention.ms", 1},
	{"b", "retention.bytes", 1},
	{"s", "retention.ms", 1000},
	{"m", "retention.ms", 60 * 1000},
	{"h", "retention.ms", 3600 * 1000},
	{"d", "retention.ms", 24 * 3600 * 1000},
	{"w", "retention.ms", 7 * 24 * 3600 * 1000},
}

// parseRetention reads a retention like "7d", "12h", "30m", "500MB" or "1GiB"
// into the topic config it sets and that config's value. "infinite" keeps
// records forever (retention.ms=-1).
func parseRetention(s string) (config, value string, err *apiError) {
	in := strings.ToLower(strings.TrimSpace(s))
	if in == "infinite" {
		return "retention.ms", "-1", nil
	}
	for _, u := range retentionUnits {
		num, ok := strings.CutSuffix(in, u.suffix)
		if !ok {
			continue
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		switch {
		case perr != nil || n < 0:
			return "", "", badRetention(s)
		case n > math.MaxInt64/u.scale:
			return "", "", errorf(http.StatusBadRequest, codeInvalidRetention, "retention %q is too large", s)
		}
		return u.config, strconv.FormatInt(n*u.scale, 10), nil
	}
	return "", "", badRetention(s)
}

func badRetention(s string) *apiError {
	return errorf(http.StatusBadRequest, codeInvalidRetention,
		`retention %q: want a whole number with a unit, a duration (ms, s, m, h, d, w: "7d") or a size (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB: "500MB"), or "infinite"`, s)
}
