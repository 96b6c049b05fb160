package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

const clusterIDFile = "cluster.id"

// loadClusterID reads the node's cluster id, creating one on first start (written
// durably: tmp file, fsync, rename, directory fsync): the configured one, or a
// random one for a single node. A configured id that differs from the stored one
// is refused: the data directory belongs to another cluster.
func loadClusterID(fsys vfs.FS, dir, configured string) (string, error) {
	path := filepath.Join(dir, clusterIDFile)
	if f, err := fsys.Open(path); err == nil {
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		if configured != "" && configured != id {
			return "", fmt.Errorf("cluster id %q does not match %q stored in %s", configured, id, path)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id := configured
	if id == "" {
		u, err := metadata.NewUUID(rand.Reader)
		if err != nil {
			return "", err
		}
		id = u.String()
	}
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return "", err
	}
	if _, err := f.Write([]byte(id + "\n")); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return "", err
	}
	return id, fsys.SyncDir(dir)
}
