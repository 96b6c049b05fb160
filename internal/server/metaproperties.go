package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/vfs"
)

// metaPropertiesFile is Kafka's record of a log directory's identity. Kafka's
// tools read it from a node's data dir: `kafka-metadata-quorum
// add-controller` takes the new voter's directory id from
// <metadata.log.dir>/meta.properties. Strata writes one in Kafka's format,
// version 1 (KIP-631), a Java properties file:
//
//	# Kafka's meta.properties: written by Strata from cluster.id and directory.id
//	version=1
//	cluster.id=<the cluster id>
//	node.id=<the node id>
//	directory.id=<the directory id, Kafka's base64 UUID>
//
// The cluster.id and directory.id files stay the source of truth: the file
// is written from them when the data dir lacks it (a new data dir, or one
// made before this file existed), and one that is present must agree with
// them and with the node id, as Kafka refuses a log directory of another
// cluster, node or directory.
const metaPropertiesFile = "meta.properties"

// metaPropertiesVersion is the only version written and read: version 0 is
// the ZooKeeper-era format, which names a broker.id instead of a node.id.
const metaPropertiesVersion = 1

// metaProperties is the identity meta.properties records.
type metaProperties struct {
	clusterID   string
	nodeID      int32
	directoryID metadata.UUID
}

// ensureMetaProperties writes want to dir's meta.properties when it has
// none, and otherwise checks that the file says the same.
func ensureMetaProperties(fsys vfs.FS, dir string, want metaProperties) error {
	path := filepath.Join(dir, metaPropertiesFile)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return writeFileDurable(fsys, dir, path, want.encode())
	} else if err != nil {
		return err
	}
	got, err := decodeMetaProperties(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := got.sameAs(want); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// sameAs says which field of m differs from want's.
func (m metaProperties) sameAs(want metaProperties) error {
	switch {
	case m.clusterID != want.clusterID:
		return fmt.Errorf("cluster.id %q is not this node's cluster id %q", m.clusterID, want.clusterID)
	case m.nodeID != want.nodeID:
		return fmt.Errorf("node.id %d is not this node's id %d: the data dir belongs to another node", m.nodeID, want.nodeID)
	case m.directoryID != want.directoryID:
		return fmt.Errorf("directory.id %v is not the data dir's %v (file %s)", m.directoryID, want.directoryID, directoryIDFile)
	}
	return nil
}

func (m metaProperties) encode() []byte {
	var b bytes.Buffer
	b.WriteString("# Kafka's meta.properties: written by Strata from cluster.id and directory.id\n")
	for _, kv := range [][2]string{
		{"version", strconv.Itoa(metaPropertiesVersion)},
		{"cluster.id", m.clusterID},
		{"node.id", strconv.Itoa(int(m.nodeID))},
		{"directory.id", m.directoryID.String()},
	} {
		b.WriteString(kv[0] + "=" + escapeProperty(kv[1]) + "\n")
	}
	return b.Bytes()
}

// decodeMetaProperties reads a version 1 meta.properties; a missing or
// malformed field, or another version, is an error.
func decodeMetaProperties(b []byte) (metaProperties, error) {
	props, err := parseProperties(b)
	if err != nil {
		return metaProperties{}, err
	}
	for _, k := range []string{"version", "cluster.id", "node.id", "directory.id"} {
		if _, ok := props[k]; !ok {
			return metaProperties{}, fmt.Errorf("no %s", k)
		}
	}
	if v := props["version"]; v != strconv.Itoa(metaPropertiesVersion) {
		return metaProperties{}, fmt.Errorf("version %q, want %d", v, metaPropertiesVersion)
	}
	var m metaProperties
	node, err := strconv.ParseInt(props["node.id"], 10, 32)
	if err != nil || node < 0 {
		return metaProperties{}, fmt.Errorf("node.id %q is not a node id", props["node.id"])
	}
	m.nodeID = int32(node)
	if m.directoryID, err = metadata.ParseUUID(props["directory.id"]); err != nil || m.directoryID.IsZero() {
		return metaProperties{}, fmt.Errorf("directory.id %q is not a directory id", props["directory.id"])
	}
	m.clusterID = props["cluster.id"]
	return m, nil
}

// parseProperties reads the Java properties lines Kafka writes: comments
// (# or !), blank lines, and key=value or key:value with backslash escapes.
// A line continued with a trailing backslash is refused, as Kafka never
// writes one.
func parseProperties(b []byte) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		props[key] = value
	}
	return props, sc.Err()
}

// splitProperty splits a line at its first unescaped = or : and unescapes
// both sides.
func splitProperty(line string) (key, value string, err error) {
	sep := -1
	for i := 0; i < len(line) && sep < 0; i++ {
		switch line[i] {
		case '\\':
			i++
		case '=', ':':
			sep = i
		}
	}
	if sep < 0 {
		return "", "", fmt.Errorf("%q is not key=value", line)
	}
	if key, err = unescapeProperty(strings.TrimRight(line[:sep], " \t\f")); err != nil {
		return "", "", err
	}
	value, err = unescapeProperty(strings.TrimLeft(line[sep+1:], " \t\f"))
	return key, value, err
}

// escapeProperty escapes s as Java's Properties.store does a value: a
// backslash before the separators, comment characters, a leading space and
// the backslash itself; control and non-ASCII characters as \uXXXX (UTF-16).
func escapeProperty(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\' || r == '=' || r == ':' || r == '#' || r == '!' || (r == ' ' && i == 0):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unescapeProperty undoes escapeProperty (and Java's \t, \n, \r, \f).
func unescapeProperty(s string) (string, error) {
	var units []uint16
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r != '\\' {
			units = utf16.AppendRune(units, r)
			continue
		}
		if i == len(s) {
			return "", errors.New("a line continued with a trailing backslash")
		}
		r, size = utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case 't':
			r = '\t'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 'f':
			r = '\f'
		case 'u':
			if i+4 > len(s) {
				return "", fmt.Errorf("a short \\u escape in %q", s)
			}
			u, err := strconv.ParseUint(s[i:i+4], 16, 16)
			if err != nil {
				return "", fmt.Errorf("a bad \\u escape in %q", s)
			}
			units = append(units, uint16(u))
			i += 4
			continue
		}
		units = utf16.AppendRune(units, r)
	}
	return string(utf16.Decode(units)), nil
}
