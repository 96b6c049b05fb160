package vfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mountTable is a mount table with the root filesystem and a few others
// around it: proc, a network namespace (nsfs, whose root is no path) and a
// mount with two optional fields.
const mountTable = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
30 27 0:4 net:[4026532286] /run/netns/a rw shared:5 - nsfs nsfs rw
31 27 0:27 / /dev/shm rw,relatime shared:6 master:2 - tmpfs tmpfs rw,size=65536k
`

func TestOwnFilesystem(t *testing.T) {
	tests := []struct {
		name         string
		mounts       string // after mountTable
		dataDir, dir string
		wantPoint    string
		wantOwn      bool
		wantErr      string
		alone        bool // mounts is the whole table, without mountTable
	}{
		{name: "a filesystem mounted at the data directory",
			mounts:  "40 27 259:1 / /data rw,noatime shared:20 - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data", wantOwn: true},
		{name: "a filesystem mounted at the logs directory",
			mounts:  "40 27 259:1 / /var/lib/strata/logs rw - ext4 /dev/sdb1 rw\n",
			dataDir: "/var/lib/strata", dir: "/var/lib/strata/logs", wantPoint: "/var/lib/strata/logs", wantOwn: true},
		{name: "only the root filesystem, above the data directory",
			dataDir: "/var/lib/strata", dir: "/var/lib/strata/logs", wantPoint: "/"},
		{name: "a filesystem mounted above the data directory",
			mounts:  "40 27 259:1 / /data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data/strata", dir: "/data/strata/logs", wantPoint: "/data"},
		{name: "a mount point that is a prefix but not a whole component",
			mounts:  "40 27 259:1 / /data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/database", dir: "/database/logs", wantPoint: "/"},
		{name: "a bind mount of a directory (a Docker volume)",
			mounts:  "40 27 254:0 /var/lib/docker/volumes/x/_data /data rw,relatime - ext4 /dev/vda rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data"},
		{name: "a bind mount stacked on a whole filesystem: the top one counts",
			mounts: "40 27 259:1 / /data rw - xfs /dev/nvme1n1 rw\n" +
				"41 40 254:0 /srv/shared /data rw - ext4 /dev/vda rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data"},
		{name: "a whole filesystem stacked on a bind mount: the top one counts",
			mounts: "40 27 254:0 /srv/shared /data rw - ext4 /dev/vda rw\n" +
				"41 40 259:1 / /data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data", wantOwn: true},
		{name: "a deeper mount listed before the shallower one",
			mounts: "41 27 259:2 / /data/logs rw - xfs /dev/nvme2n1 rw\n" +
				"40 27 254:0 /srv/shared /data rw - ext4 /dev/vda rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data/logs", wantOwn: true},
		{name: "a mount below the logs directory does not hold it",
			mounts:  "40 27 259:1 / /data/logs/t-0 rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/"},
		{name: "escaped space and backslash in the mount point",
			mounts:  `40 27 259:1 / /srv/strata\040data\134x rw - xfs /dev/nvme1n1 rw` + "\n",
			dataDir: `/srv/strata data\x`, dir: `/srv/strata data\x/logs`, wantPoint: `/srv/strata data\x`, wantOwn: true},
		{name: "an escaped space in the root of a bind mount",
			mounts:  `40 27 254:0 /home/a\040b /data rw - ext4 /dev/vda rw` + "\n",
			dataDir: "/data", dir: "/data/logs", wantPoint: "/data"},
		{name: "no separator: an error",
			mounts:  "40 27 259:1 / /data rw xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "line 5"},
		{name: "fields missing after the separator: an error",
			mounts:  "40 27 259:1 / /data rw - xfs\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "line 5"},
		{name: "a mount ID that is not a number: an error",
			mounts:  "x 27 259:1 / /data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "mount IDs"},
		{name: "a device that is not major:minor: an error",
			mounts:  "40 27 259 / /data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "major:minor"},
		{name: "a broken escape: an error",
			mounts:  `40 27 259:1 / /data\04 rw - xfs /dev/nvme1n1 rw` + "\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "octal"},
		{name: "a relative mount point: an error",
			mounts:  "40 27 259:1 / data rw - xfs /dev/nvme1n1 rw\n",
			dataDir: "/data", dir: "/data/logs", wantErr: "absolute"},
		{name: "no mount holds the directory: an error",
			mounts: "40 27 259:1 / /data rw - xfs /dev/nvme1n1 rw\n", alone: true,
			dataDir: "/srv", dir: "/srv/logs", wantErr: "no mount holds /srv/logs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := mountTable + tt.mounts
			if tt.alone {
				table = tt.mounts
			}
			m, own, err := ownFilesystem(strings.NewReader(table), tt.dataDir, tt.dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Point != tt.wantPoint || own != tt.wantOwn {
				t.Fatalf("mount %+v own %v, want point %q own %v", m, own, tt.wantPoint, tt.wantOwn)
			}
		})
	}
}

func TestParseMountInfoFields(t *testing.T) {
	mounts, err := parseMountInfo(strings.NewReader(mountTable +
		`40 27 259:1 /a\011b /srv/x\012y rw - fuse.sshfs user@host:/a\040b rw` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", Point: "/proc", FSType: "proc", Source: "proc"},
		{Root: "/", Point: "/", FSType: "ext4", Source: "/dev/vda"},
		{Root: "net:[4026532286]", Point: "/run/netns/a", FSType: "nsfs", Source: "nsfs"},
		{Root: "/", Point: "/dev/shm", FSType: "tmpfs", Source: "tmpfs"},
		{Root: "/a\tb", Point: "/srv/x\ny", FSType: "fuse.sshfs", Source: "user@host:/a b"},
	}
	if len(mounts) != len(want) {
		t.Fatalf("%d mounts, want %d: %+v", len(mounts), len(want), mounts)
	}
	for i := range want {
		if mounts[i] != want[i] {
			t.Errorf("mount %d: %+v, want %+v", i, mounts[i], want[i])
		}
	}
}

// TestOwnFilesystemOS reads this process's mount table: a fresh temporary
// directory is never a mount point, so its filesystem is not its own, and a
// symbolic link to it resolves to it.
func TestOwnFilesystemOS(t *testing.T) {
	dataDir := t.TempDir()
	logs := filepath.Join(dataDir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(logs, link); err != nil {
		t.Fatal(err)
	}
	m, own, err := OwnFilesystem(dataDir, link)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := filepath.EvalSymlinks(logs)
	if err != nil {
		t.Fatal(err)
	}
	if own || !within(resolved, m.Point) {
		t.Fatalf("mount %+v own %v for %s, want a mount holding it that is not its own", m, own, resolved)
	}
	if _, _, err := OwnFilesystem(dataDir, filepath.Join(dataDir, "missing")); err == nil {
		t.Fatal("OwnFilesystem of a missing directory succeeded")
	}
}
