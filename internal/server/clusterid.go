package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

const (
	clusterIDFile   = "cluster.id"
	directoryIDFile = "directory.id"
)

// loadClusterID reads the node's cluster id, creating one on first start (written
// durably: tmp file, fsync, rename, directory fsync): the configured one, or a
// random one for a single node. A configured id that differs from the stored one
// is refused: the data directory belongs to another cluster.
func loadClusterID(fsys vfs.FS, dir, configured string) (string, error) {
	path := filepath.Join(dir, clusterIDFile)
	id, err := readIDFile(fsys, path)
	switch {
	case err == nil:
		if configured != "" && configured != id {
			return "", fmt.Errorf("cluster id %q does not match %q stored in %s", configured, id, path)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	id = configured
	if id == "" {
		u, err := metadata.NewUUID(rand.Reader)
		if err != nil {
			return "", err
		}
		id = u.String()
	}
	return id, writeIDFile(fsys, dir, path, id)
}

// loadDirectoryID reads the data directory's id, creating a random one the
// first time the directory is used (as Kafka's directory.id, KIP-858). The
// broker registers with it, so the controller knows a node that comes back
// with the same node id and an empty data directory, whose replicas hold
// nothing (controller.PlanRegisterBroker).
func loadDirectoryID(fsys vfs.FS, dir string) (metadata.UUID, error) {
	path := filepath.Join(dir, directoryIDFile)
	s, err := readIDFile(fsys, path)
	if err == nil {
		id, err := metadata.ParseUUID(s)
		if err != nil || id.IsZero() {
			return metadata.UUID{}, fmt.Errorf("%s holds %q, not a directory id", path, s)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return metadata.UUID{}, err
	}
	id, err := metadata.NewUUID(rand.Reader)
	if err != nil {
		return metadata.UUID{}, err
	}
	return id, writeIDFile(fsys, dir, path, id.String())
}

// readIDFile reads the one-line id in path; an empty file is an error.
func readIDFile(fsys vfs.FS, path string) (string, error) {
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return id, nil
}

// writeIDFile writes id to path in dir durably (writeFileDurable).
func writeIDFile(fsys vfs.FS, dir, path, id string) error {
	return writeFileDurable(fsys, dir, path, []byte(id+"\n"))
}

// writeFileDurable writes b to path in dir durably: tmp file, fsync, rename,
// directory fsync.
func writeFileDurable(fsys vfs.FS, dir, path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
