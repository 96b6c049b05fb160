package config

import (
	"strings"
	"testing"
)

func TestAdminAddr(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		want    string
		wantErr string
	}{
		{name: "off by default", want: ""},
		{name: "flag", args: []string{"--admin-addr=127.0.0.1:6060"}, want: "127.0.0.1:6060"},
		{name: "env", env: map[string]string{"STRATA_ADMIN_ADDR": "127.0.0.1:6061"}, want: "127.0.0.1:6061"},
		{name: "file", file: `{"admin-addr": "127.0.0.1:6062"}`, want: "127.0.0.1:6062"},
		{name: "bad", args: []string{"--admin-addr=nope"}, wantErr: "admin-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolve(t, tt.args, tt.env, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AdminAddr != tt.want {
				t.Fatalf("AdminAddr = %q, want %q", c.AdminAddr, tt.want)
			}
		})
	}
}
