package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeWrapper gives each node of a testcluster its own extra flags. testcluster
// starts every node with the same binary and the same extra flags; the harness
// needs per-node ones (each node advertises its own proxy and reaches each peer
// through the proxy of that link). So testcluster is pointed at a small shell
// script instead of the strata binary: it records the arguments testcluster gave
// (the harness reads the node's real addresses from them), appends the node's
// flags file and execs strata, so the process testcluster signals is strata.
//
// Files in dir, per node id:
//
//	file             written by      content
//	---------------  --------------  -------------------------------------------
//	node-<id>.flags  the harness     extra flags, one per line
//	node-<id>.args   the script      the arguments testcluster passed, one a line
type nodeWrapper struct {
	dir    string
	script string
}

const wrapperScript = `#!/bin/sh
# Written by internal/chaos: runs strata with this node's extra flags.
id=
prev=
for a in "$@"; do
	[ "$prev" = --node-id ] && id=$a
	prev=$a
done
printf '%%s\n' "$@" > %[1]s/node-$id.args.tmp && mv %[1]s/node-$id.args.tmp %[1]s/node-$id.args || exit 1
set -- "$@" $(cat %[1]s/node-$id.flags)
exec %[2]s "$@"
`

// newNodeWrapper writes the script into dir, to run binary.
func newNodeWrapper(dir, binary string) (*nodeWrapper, error) {
	w := &nodeWrapper{dir: dir, script: filepath.Join(dir, "strata-node")}
	body := fmt.Sprintf(wrapperScript, shellQuote(dir), shellQuote(binary))
	if err := os.WriteFile(w.script, []byte(body), 0o755); err != nil {
		return nil, err
	}
	return w, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// setFlags writes node id's extra flags.
func (w *nodeWrapper) setFlags(id int32, flags ...string) error {
	for _, f := range flags {
		if f == "" || strings.ContainsAny(f, " \t\n") {
			return fmt.Errorf("flag %q: empty or holds white space", f)
		}
	}
	return os.WriteFile(w.path(id, "flags"), []byte(strings.Join(flags, "\n")+"\n"), 0o644)
}

// arg returns the value testcluster gave node id's flag name (e.g.
// "--kafka-addr"), as recorded by the script when the node last started.
func (w *nodeWrapper) arg(id int32, name string) (string, error) {
	b, err := os.ReadFile(w.path(id, "args"))
	if err != nil {
		return "", err
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1], nil
		}
	}
	return "", fmt.Errorf("node %d was not started with %s", id, name)
}

func (w *nodeWrapper) path(id int32, ext string) string {
	return filepath.Join(w.dir, "node-"+strconv.Itoa(int(id))+"."+ext)
}
