package vfs

// Mount is one entry of the operating system's mount table (OwnFilesystem).
type Mount struct {
	// Root is the directory of the filesystem mounted at Point: "/" when the
	// whole filesystem is, another path for a bind mount of a directory.
	Root   string
	Point  string
	FSType string // "ext4", "xfs", "tmpfs", ...
	Source string // "/dev/nvme1n1", or what the filesystem names it
}
