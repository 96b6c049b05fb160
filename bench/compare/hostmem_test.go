package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostReportedKiB(t *testing.T) {
	defer func(p string) { reportedKiBPath = p }(reportedKiBPath)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		write         bool
		kib           int64
		ok            bool
	}{
		{"reporting", "66097116\n", true, 66097116, true},
		{"no such file", "", false, 0, false},
		{"not a number", "many\n", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reportedKiBPath = filepath.Join(dir, tc.name)
			if tc.write {
				if err := os.WriteFile(reportedKiBPath, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			kib, ok := hostReportedKiB()
			if kib != tc.kib || ok != tc.ok {
				t.Fatalf("hostReportedKiB() = %d, %t; want %d, %t", kib, ok, tc.kib, tc.ok)
			}
		})
	}
}

func TestWriteHostReporting(t *testing.T) {
	p := &pairing{Name: "defaults"}
	p.add(sample{System: "strata", Workload: "w", Round: 1, Value: 1, HostReportedKiB: 3 << 10})
	p.add(sample{System: "kafka", Workload: "w", Round: 1, Value: 1, HostReportedKiB: 1 << 20})
	p.add(sample{System: "kafka", Workload: "w", Round: 2, Value: 1, HostReportedKiB: 512 << 10})
	r := &report{Pairings: []*pairing{p}}
	var b strings.Builder
	r.writeHostReporting(&b)
	if b.Len() != 0 {
		t.Fatalf("a machine that does not report got a note: %q", b.String())
	}
	r.Machine.PageReporting = true
	r.writeHostReporting(&b)
	if want := "3 MiB in Strata's, 1536 MiB in Kafka's"; !strings.Contains(b.String(), want) {
		t.Fatalf("note %q does not say %q", b.String(), want)
	}
}
