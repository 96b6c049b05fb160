package config

import (
	"strings"
	"testing"
)

func TestLogCacheTailBytes(t *testing.T) {
	for args, want := range map[string]int64{"": 64 << 20, "--log-cache-tail-bytes=1048576": 1 << 20, "--log-cache-tail-bytes=-1": -1} {
		c, err := resolve(t, strings.Fields(args), nil, "")
		if err != nil || c.LogCacheTailBytes != want {
			t.Errorf("%q: LogCacheTailBytes %d, err %v; want %d", args, c.LogCacheTailBytes, err, want)
		}
	}
	for _, bad := range []string{"0", "-2"} {
		if _, err := resolve(t, []string{"--log-cache-tail-bytes=" + bad}, nil, ""); err == nil || !strings.Contains(err.Error(), "log-cache-tail-bytes") {
			t.Errorf("--log-cache-tail-bytes=%s: err %v, want a log-cache-tail-bytes error", bad, err)
		}
	}
}
