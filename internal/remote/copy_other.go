//go:build !linux

package remote

import (
	"context"
	"io"

	"github.com/strata-stream/strata/internal/vfs"
)

// copySection leaves every copy to the buffered path on this platform.
func copySection(context.Context, vfs.File, *io.SectionReader, int64) (int64, bool, error) {
	return 0, false, nil
}
