package server

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/vfs"
)

func TestLogDirSync(t *testing.T) {
	whole := vfs.Mount{Root: "/", Point: "/data", FSType: "xfs", Source: "/dev/nvme1n1"}
	above := vfs.Mount{Root: "/", Point: "/", FSType: "ext4", Source: "/dev/vda"}
	bind := vfs.Mount{Root: "/var/lib/docker/volumes/x/_data", Point: "/data", FSType: "ext4", Source: "/dev/vda"}
	noSyncFS := struct{ vfs.FS }{vfs.NewMem()} // hides MemFS's OpenFSSync
	tests := []struct {
		name       string
		mode       string
		fsys       vfs.FS
		mount      vfs.Mount
		own        bool
		mountErr   error
		want       string
		wantReason string
		wantErr    string
		wantLookup bool // ownFilesystem is asked
	}{
		{name: "file", mode: config.LogDirSyncFile, fsys: vfs.Default, own: true,
			want: config.LogDirSyncFile, wantReason: "--log-dir-sync=file"},
		{name: "filesystem", mode: config.LogDirSyncFilesystem, fsys: vfs.Default,
			want: config.LogDirSyncFilesystem, wantReason: "--log-dir-sync=filesystem"},
		{name: "filesystem on the in-memory filesystem", mode: config.LogDirSyncFilesystem, fsys: vfs.NewMem(),
			want: config.LogDirSyncFilesystem, wantReason: "--log-dir-sync=filesystem"},
		{name: "filesystem where syncfs is missing", mode: config.LogDirSyncFilesystem, fsys: noSyncFS,
			wantErr: "--log-dir-sync=filesystem: the filesystem of /data/logs cannot be synced"},
		{name: "auto where syncfs is missing", mode: config.LogDirSyncAuto, fsys: noSyncFS, own: true,
			want: config.LogDirSyncFile, wantReason: "cannot be synced here"},
		{name: "auto not on the operating system's filesystem", mode: config.LogDirSyncAuto, fsys: vfs.NewMem(), own: true,
			want: config.LogDirSyncFile, wantReason: "not on the operating system's filesystem"},
		{name: "auto on a filesystem of its own", mode: config.LogDirSyncAuto, fsys: vfs.Default, mount: whole, own: true, wantLookup: true,
			want: config.LogDirSyncFilesystem, wantReason: "auto: a filesystem of its own (xfs /dev/nvme1n1) is mounted at /data"},
		{name: "auto on a filesystem mounted above", mode: config.LogDirSyncAuto, fsys: vfs.Default, mount: above, wantLookup: true,
			want: config.LogDirSyncFile, wantReason: "(ext4 /dev/vda) is mounted at /, outside the data directory /data"},
		{name: "auto on a bind mount", mode: config.LogDirSyncAuto, fsys: vfs.Default, mount: bind, wantLookup: true,
			want: config.LogDirSyncFile, wantReason: "a bind mount of /var/lib/docker/volumes/x/_data of ext4 /dev/vda at /data"},
		{name: "auto when the mount table cannot be read", mode: config.LogDirSyncAuto, fsys: vfs.Default, own: true,
			mountErr: errors.New("mountinfo line 3: bad"), wantLookup: true,
			want: config.LogDirSyncFile, wantReason: "cannot tell whose filesystem holds the logs directory: mountinfo line 3: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			looked := false
			lookup := func(dataDir, dir string) (vfs.Mount, bool, error) {
				looked = true
				if dataDir != "/data" || dir != "/data/logs" {
					t.Errorf("ownFilesystem(%q, %q), want /data and /data/logs", dataDir, dir)
				}
				return tt.mount, tt.own, tt.mountErr
			}
			got, reason, err := logDirSync(tt.mode, tt.fsys, "/data", "/data/logs", lookup)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || !strings.Contains(reason, tt.wantReason) {
				t.Fatalf("got %q (%q), err %v; want %q (%q)", got, reason, err, tt.want, tt.wantReason)
			}
			if looked != tt.wantLookup {
				t.Fatalf("ownFilesystem asked: %v, want %v", looked, tt.wantLookup)
			}
		})
	}
}

// fsSyncRecorder records the directories whose filesystem is opened for
// syncfs (storage.LogDirOptions.SyncFilesystem).
type fsSyncRecorder struct {
	*vfs.MemFS
	mu   sync.Mutex
	dirs []string
}

func (r *fsSyncRecorder) OpenFSSync(dir string) (vfs.FSSyncHandle, error) {
	r.mu.Lock()
	r.dirs = append(r.dirs, dir)
	r.mu.Unlock()
	return r.MemFS.OpenFSSync(dir)
}

// TestLogDirSyncReachesTheLogDir: --log-dir-sync=filesystem makes the logs
// directory sync its filesystem.
func TestLogDirSyncReachesTheLogDir(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.LogDirSync = config.LogDirSyncFilesystem
	fsys := &fsSyncRecorder{MemFS: vfs.NewMem()}
	startOn(t, cfg, fsys).Close()
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if want := filepath.Join(cfg.DataDir, "logs"); !slices.Equal(fsys.dirs, []string{want}) {
		t.Fatalf("filesystems opened for syncfs at %q, want %q", fsys.dirs, want)
	}
}
