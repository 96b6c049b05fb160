package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// BenchmarkOpenLogDir opens n partition logs, each holding one small batch, on
// the real disk (a temp dir) through a LogDir, as a broker's restart does:
//
//	clean    after a clean shutdown (markers written)
//	crashed  as after kill -9 once everything was synced: no markers, so each
//	         log recovers its active segment
//
// Each op is the whole directory: OpenLogDir and n Opens; closing is untimed.
func BenchmarkOpenLogDir(b *testing.B) {
	for _, n := range []int{1000} {
		for _, mode := range []string{"clean", "crashed"} {
			b.Run(fmt.Sprintf("%s/partitions=%d", mode, n), func(b *testing.B) {
				dir := filepath.Join(b.TempDir(), "logs")
				cfg := Config{}
				open := func() (*LogDir, []*Log) {
					d, err := OpenLogDir(vfs.Default, dir, LogDirOptions{})
					if err != nil {
						b.Fatal(err)
					}
					logs := make([]*Log, n)
					for i := range logs {
						if logs[i], err = d.Open(fmt.Sprintf("t-%d", i), cfg); err != nil {
							b.Fatal(err)
						}
					}
					return d, logs
				}
				shut := func(d *LogDir, logs []*Log) {
					for _, l := range logs {
						if err := l.Close(); err != nil {
							b.Fatal(err)
						}
					}
					if err := d.Close(); err != nil {
						b.Fatal(err)
					}
					if mode == "crashed" {
						if err := vfs.Default.Remove(filepath.Join(dir, dirCleanShutdownName)); err != nil {
							b.Fatal(err)
						}
					}
				}
				d, logs := open()
				for _, l := range logs {
					if _, err := l.Append(mkBatch(1, 100, 1000), 0); err != nil {
						b.Fatal(err)
					}
				}
				shut(d, logs)
				b.ResetTimer()
				for range b.N {
					d, logs := open()
					b.StopTimer()
					shut(d, logs)
					b.StartTimer()
				}
			})
		}
	}
}
