package vfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnFilesystem reports whether dir is on a filesystem given to dataDir: one
// mounted whole (not a bind mount of one of its directories) at dataDir or
// inside it, so that nothing outside dataDir writes to it through this mount
// table. It returns the mount holding dir either way. Both paths must exist;
// symbolic links in them are resolved. It reads /proc/self/mountinfo.
func OwnFilesystem(dataDir, dir string) (Mount, bool, error) {
	dataDir, err := resolvePath(dataDir)
	if err != nil {
		return Mount{}, false, err
	}
	if dir, err = resolvePath(dir); err != nil {
		return Mount{}, false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, false, err
	}
	defer f.Close()
	return ownFilesystem(f, dataDir, dir)
}

func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// ownFilesystem is OwnFilesystem over the mount table r (mountinfo's
// format), for clean absolute paths with no symbolic link in them.
func ownFilesystem(r io.Reader, dataDir, dir string) (Mount, bool, error) {
	mounts, err := parseMountInfo(r)
	if err != nil {
		return Mount{}, false, err
	}
	m, ok := mountOf(mounts, dir)
	if !ok {
		return Mount{}, false, fmt.Errorf("mountinfo: no mount holds %s", dir)
	}
	return m, m.Root == "/" && within(m.Point, dataDir), nil
}

// mountOf returns the mount holding path: the one whose mount point is its
// longest prefix in whole path components. Of mounts at one point the last
// listed is on top (stacked mounts), and it is the one path reaches.
func mountOf(mounts []Mount, path string) (Mount, bool) {
	var best Mount
	found := false
	for _, m := range mounts {
		if within(path, m.Point) && (!found || len(m.Point) >= len(best.Point)) {
			best, found = m, true
		}
	}
	return best, found
}

// within reports whether path is dir or below it, in whole components.
func within(path, dir string) bool {
	return dir == "/" || path == dir || strings.HasPrefix(path, dir+"/")
}

// parseMountInfo parses a mount table in the format of /proc/PID/mountinfo
// (proc(5)), one mount a line, fields separated by one space:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8)  (9)    (10)       (11)
//
// mount ID, parent ID, major:minor, root (the directory of the filesystem
// mounted here), mount point, mount options, zero or more optional fields,
// a "-", filesystem type, source, super options. Paths escape a space, tab,
// newline and backslash as \ooo (octal).
//
// A line it cannot parse is an error, not skipped: the kernel writes every
// line, so one that does not parse means the format is not understood, and a
// mount left out could be the one stacked on top of the others at a point.
func parseMountInfo(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20) // options list every layer of an overlay
	for n := 1; sc.Scan(); n++ {
		m, err := parseMountLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n, err)
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return mounts, nil
}

func parseMountLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	sep := 6
	for sep < len(f) && f[sep] != "-" {
		sep++
	}
	if sep+4 != len(f) {
		return Mount{}, fmt.Errorf("%q: want 6 fields, optional fields, a -, then 3 fields", line)
	}
	if !isDecimal(f[0]) || !isDecimal(f[1]) {
		return Mount{}, fmt.Errorf("%q: mount IDs %q and %q are not both numbers", line, f[0], f[1])
	}
	if major, minor, ok := strings.Cut(f[2], ":"); !ok || !isDecimal(major) || !isDecimal(minor) {
		return Mount{}, fmt.Errorf("%q: device %q is not major:minor", line, f[2])
	}
	var m Mount
	var err error
	for _, field := range []struct {
		dst *string
		src string
	}{{&m.Root, f[3]}, {&m.Point, f[4]}, {&m.FSType, f[sep+1]}, {&m.Source, f[sep+2]}} {
		if *field.dst, err = unescapeOctal(field.src); err != nil {
			return Mount{}, fmt.Errorf("%q: %w", line, err)
		}
	}
	if !strings.HasPrefix(m.Point, "/") {
		return Mount{}, fmt.Errorf("%q: mount point %q is not an absolute path", line, m.Point)
	}
	return m, nil
}

func isDecimal(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

var errBadEscape = errors.New(`a \ not followed by three octal digits`)

// unescapeOctal decodes mountinfo's \ooo escapes.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", errBadEscape
		}
		c, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", errBadEscape
		}
		b.WriteByte(byte(c))
		i += 3
	}
	return b.String(), nil
}
