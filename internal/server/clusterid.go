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
// durably: tmp file, fsync, rename, directory fsync).
func loadClusterID(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, clusterIDFile)
	if f, err := fsys.Open(path); err == nil {
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		id := strings.TrimSpace(string(b))
		if _, err := metadata.ParseUUID(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	u, err := metadata.NewUUID(rand.Reader)
	if err != nil {
		return "", err
	}
	id := u.String()
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
