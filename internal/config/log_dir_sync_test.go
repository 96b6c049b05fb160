package config

import (
	"strings"
	"testing"
)

func TestLogDirSync(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string // STRATA_LOG_DIR_SYNC
		want string
	}{
		{want: LogDirSyncFile},
		{args: []string{"--log-dir-sync=file"}, want: LogDirSyncFile},
		{args: []string{"--log-dir-sync=filesystem"}, want: LogDirSyncFilesystem},
		{args: []string{"--log-dir-sync=auto"}, env: "file", want: LogDirSyncAuto},
		{env: "filesystem", want: LogDirSyncFilesystem},
	} {
		c, err := resolve(t, tt.args, map[string]string{"STRATA_LOG_DIR_SYNC": tt.env}, "")
		if err != nil || c.LogDirSync != tt.want {
			t.Errorf("%q env %q: LogDirSync %q, err %v; want %q", tt.args, tt.env, c.LogDirSync, err, tt.want)
		}
	}
	for _, bad := range []string{"fsync", "", "File"} {
		_, err := resolve(t, []string{"--log-dir-sync=" + bad}, nil, "")
		// The error names the flag and every value it takes.
		if err == nil || !strings.Contains(err.Error(), "log-dir-sync must be file, filesystem or auto") {
			t.Errorf("--log-dir-sync=%q: err %v, want one naming the flag and its values", bad, err)
		}
	}
}
