package config

import (
	"strings"
	"testing"
)

func TestLogCacheTailBytes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int64
		wantErr string
	}{
		{name: "default", want: 64 << 20},
		{name: "flag", args: []string{"--log-cache-tail-bytes=1048576"}, want: 1 << 20},
		{name: "drop nothing", args: []string{"--log-cache-tail-bytes=-1"}, want: -1},
		{name: "zero", args: []string{"--log-cache-tail-bytes=0"}, wantErr: "log-cache-tail-bytes"},
		{name: "below -1", args: []string{"--log-cache-tail-bytes=-2"}, wantErr: "log-cache-tail-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolve(t, tt.args, nil, "")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.LogCacheTailBytes != tt.want {
				t.Fatalf("LogCacheTailBytes = %d, want %d", c.LogCacheTailBytes, tt.want)
			}
		})
	}
}
