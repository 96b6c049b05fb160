package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

var testMeta = metaProperties{clusterID: "strata-test", nodeID: 4, directoryID: metadata.UUID{1, 2, 3}}

// TestEnsureMetaProperties: a data dir without meta.properties gets one that
// reads back as written, and keeps it; one that names another cluster, node
// or directory, or that is not a version 1 meta.properties, is refused with
// the field at fault.
func TestEnsureMetaProperties(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureMetaProperties(fsys, "d", testMeta); err != nil {
		t.Fatalf("first start: %v", err)
	}
	b, err := vfs.ReadFile(fsys, filepath.Join("d", metaPropertiesFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeMetaProperties(b); err != nil || got != testMeta {
		t.Fatalf("written file reads back as %+v, %v; want %+v", got, err, testMeta)
	}
	if err := ensureMetaProperties(fsys, "d", testMeta); err != nil {
		t.Fatalf("second start: %v", err)
	}

	other := func(f func(*metaProperties)) metaProperties { m := testMeta; f(&m); return m }
	for _, tc := range []struct {
		name string
		want metaProperties
		err  string
	}{
		{"another cluster", other(func(m *metaProperties) { m.clusterID = "other" }), "cluster.id"},
		{"another node", other(func(m *metaProperties) { m.nodeID = 5 }), "node.id 4 is not this node's id 5"},
		{"another directory", other(func(m *metaProperties) { m.directoryID = metadata.UUID{9} }), "directory.id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ensureMetaProperties(fsys, "d", tc.want)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("got %v, want an error naming %q", err, tc.err)
			}
		})
	}
}

// TestDecodeMetaProperties reads what Kafka writes (a date comment, any key
// order) and refuses files that are not version 1 meta.properties.
func TestDecodeMetaProperties(t *testing.T) {
	dir := testMeta.directoryID.String()
	for _, tc := range []struct {
		name, file string
		err        string // "" for a file that decodes to testMeta
	}{
		{"Kafka's", "#\n#Fri Dec 04 04:15:33 UTC 2026\nnode.id=4\ndirectory.id=" + dir + "\nversion=1\ncluster.id=strata-test\n", ""},
		{"spaces and colons", "version : 1\n  cluster.id:strata-test\nnode.id = 4\n! comment\ndirectory.id=" + dir + "\n", ""},
		{"version 0", "version=0\nbroker.id=4\ncluster.id=strata-test\n", "no node.id"},
		{"version 2", "version=2\ncluster.id=strata-test\nnode.id=4\ndirectory.id=" + dir + "\n", "version"},
		{"no directory", "version=1\ncluster.id=strata-test\nnode.id=4\n", "no directory.id"},
		{"bad node id", "version=1\ncluster.id=strata-test\nnode.id=four\ndirectory.id=" + dir + "\n", "node.id"},
		{"negative node id", "version=1\ncluster.id=strata-test\nnode.id=-1\ndirectory.id=" + dir + "\n", "node.id"},
		{"bad directory id", "version=1\ncluster.id=strata-test\nnode.id=4\ndirectory.id=xyz\n", "directory.id"},
		{"zero directory id", "version=1\ncluster.id=strata-test\nnode.id=4\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n", "directory.id"},
		{"not key=value", "version=1\ngarbage\n", "line 2"},
		{"continued line", "version=1\\\n", "trailing backslash"},
		{"bad escape", "version=1\ncluster.id=\\uzz\n", "escape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeMetaProperties([]byte(tc.file))
			switch {
			case tc.err == "" && (err != nil || got != testMeta):
				t.Errorf("got %+v, %v; want %+v", got, err, testMeta)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %+v, %v; want an error naming %q", got, err, tc.err)
			}
		})
	}
}

// TestMetaPropertiesEscaping: a cluster id with the characters Java's
// properties format escapes reads back unchanged.
func TestMetaPropertiesEscaping(t *testing.T) {
	for _, id := range []string{"a=b:c#d!e", ` lead\back`, "tab\there", "é-ü-日本", "emoji-😀", "ctl\x01"} {
		m := testMeta
		m.clusterID = id
		got, err := decodeMetaProperties(m.encode())
		if err != nil || got != m {
			t.Errorf("cluster id %q reads back as %+v, %v", id, got, err)
		}
	}
}

// FuzzMetaProperties: any file decodes or is refused, never a panic, and what
// decodes encodes to a file that decodes the same; any identity with a UTF-8
// cluster id reads back from its encoding unchanged.
func FuzzMetaProperties(f *testing.F) {
	f.Add(string(testMeta.encode()), "strata-test", int32(4))
	f.Add("version : 1\n  cluster.id:a\\u00e9\nnode.id = 4\n! c\ndirectory.id="+testMeta.directoryID.String()+"\n", ` lead\back`, int32(0))
	f.Add("version=1\ncluster.id=\\ud83d\\ude00\n", "ctl\x01=:#!", int32(7))
	f.Fuzz(func(t *testing.T, file, clusterID string, node int32) {
		if m, err := decodeMetaProperties([]byte(file)); err == nil {
			if again, err := decodeMetaProperties(m.encode()); err != nil || again != m {
				t.Fatalf("%+v re-encoded reads back as %+v, %v", m, again, err)
			}
		}
		if !utf8.ValidString(clusterID) || node < 0 {
			return
		}
		m := metaProperties{clusterID: clusterID, nodeID: node, directoryID: testMeta.directoryID}
		if got, err := decodeMetaProperties(m.encode()); err != nil || got != m {
			t.Fatalf("%+v reads back as %+v, %v", m, got, err)
		}
	})
}

// TestStartWritesMetaProperties: a node writes meta.properties on its first
// start; a data dir that lacks one (made by an older build) gains it on the
// next start, the same; and a node refuses to start on a data dir whose
// meta.properties names another node.
func TestStartWritesMetaProperties(t *testing.T) {
	dir := t.TempDir()
	cfg := nodeConfig(dir)
	path := filepath.Join(dir, metaPropertiesFile)
	startOn(t, cfg, vfs.Default).Close()
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMetaProperties(first)
	if err != nil {
		t.Fatal(err)
	}
	dirID, err := loadDirectoryID(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	clusterID, err := readIDFile(vfs.Default, filepath.Join(dir, clusterIDFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := (metaProperties{clusterID: clusterID, nodeID: cfg.NodeID, directoryID: dirID}); m != want {
		t.Fatalf("meta.properties says %+v, want %+v", m, want)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	startOn(t, cfg, vfs.Default).Close()
	if again, err := os.ReadFile(path); err != nil || string(again) != string(first) {
		t.Fatalf("meta.properties rewritten as %q, %v; want %q", again, err, first)
	}

	m.nodeID++
	if err := os.WriteFile(path, m.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, testLogger(), vfs.Default)
	if err == nil {
		n.Close()
		t.Fatal("started on a data dir whose meta.properties names another node")
	}
	if !strings.Contains(err.Error(), "node.id") {
		t.Errorf("start refused with %v, want the node.id named", err)
	}
}
