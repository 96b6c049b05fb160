package server

import (
	"fmt"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/vfs"
)

// logDirSync resolves --log-dir-sync (mode) for the logs directory logsDir of
// dataDir to file or filesystem (replica.Options.SyncFilesystem) and says why,
// for the start-up log. ownFilesystem is vfs.OwnFilesystem, or a test's stand-in;
// auto asks it only about the operating system's filesystem, so logsDir must
// exist by then.
func logDirSync(mode string, fsys vfs.FS, dataDir, logsDir string,
	ownFilesystem func(dataDir, dir string) (vfs.Mount, bool, error)) (resolved, reason string, err error) {
	_, canSyncFS := fsys.(vfs.FSSyncOpener)
	switch {
	case mode == config.LogDirSyncFile:
		return config.LogDirSyncFile, "--log-dir-sync=file", nil
	case mode == config.LogDirSyncFilesystem && !canSyncFS:
		return "", "", fmt.Errorf("--log-dir-sync=filesystem: the filesystem of %s cannot be synced as a whole here (syncfs(2) is Linux only)", logsDir)
	case mode == config.LogDirSyncFilesystem:
		return config.LogDirSyncFilesystem, "--log-dir-sync=filesystem", nil
	case !canSyncFS:
		return config.LogDirSyncFile, "auto: a whole filesystem cannot be synced here (syncfs(2) is Linux only)", nil
	case fsys != vfs.Default:
		return config.LogDirSyncFile, "auto: the logs are not on the operating system's filesystem", nil
	}
	m, own, err := ownFilesystem(dataDir, logsDir)
	switch {
	case err != nil:
		return config.LogDirSyncFile, fmt.Sprintf("auto: cannot tell whose filesystem holds the logs directory: %v", err), nil
	case own:
		return config.LogDirSyncFilesystem, fmt.Sprintf("auto: a filesystem of its own (%s %s) is mounted at %s", m.FSType, m.Source, m.Point), nil
	case m.Root != "/":
		return config.LogDirSyncFile, fmt.Sprintf("auto: the logs directory is on a bind mount of %s of %s %s at %s, whose other directories others may write to",
			m.Root, m.FSType, m.Source, m.Point), nil
	default:
		return config.LogDirSyncFile, fmt.Sprintf("auto: the filesystem holding the logs directory (%s %s) is mounted at %s, outside the data directory %s",
			m.FSType, m.Source, m.Point, dataDir), nil
	}
}
