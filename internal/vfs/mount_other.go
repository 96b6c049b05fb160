//go:build !linux

package vfs

import (
	"errors"
	"fmt"
)

// OwnFilesystem says no: reading the mount table is only implemented on Linux
// (as is syncfs).
func OwnFilesystem(dataDir, dir string) (Mount, bool, error) {
	return Mount{}, false, fmt.Errorf("mount table: %w", errors.ErrUnsupported)
}
