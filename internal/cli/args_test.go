package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/admin"
)

func TestParseKeyValue(t *testing.T) {
	for _, tc := range []struct {
		in, k, v string
		bad      bool
	}{
		{in: "a=b", k: "a", v: "b"},
		{in: "a=", k: "a", v: ""},
		{in: "a=b=c", k: "a", v: "b=c"},
		{in: "a", bad: true},
		{in: "=b", bad: true},
		{in: "", bad: true},
	} {
		k, v, err := ParseKeyValue("-c", tc.in)
		if tc.bad != (err != nil) || k != tc.k || v != tc.v {
			t.Errorf("%q: %q, %q, %v", tc.in, k, v, err)
		}
		if tc.bad && (ExitCode(err) != 2 || !strings.HasPrefix(err.Error(), "-c: ")) {
			t.Errorf("%q: %v is not a usage error naming the flag", tc.in, err)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("broker said no"), 1},
		{Usagef("bad flag"), 2},
		{Usage(errors.New("bad flag")), 2},
		{Usage(nil), 0},
		{errors.Join(errors.New("x"), Usagef("y")), 2},
		{&NoBrokerError{Brokers: []string{"h:1"}}, 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestParseBrokers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		bad  bool
	}{
		{in: "127.0.0.1:9092", want: "127.0.0.1:9092"},
		{in: " a:1, b:2 ,", want: "a:1|b:2"},
		{in: "[::1]:9092", want: "[::1]:9092"},
		{in: "", bad: true},
		{in: " , ", bad: true},
		{in: "localhost", bad: true},
		{in: "host:", bad: true},
	} {
		got, err := ParseBrokers(tc.in)
		if tc.bad {
			if ExitCode(err) != 2 {
				t.Errorf("%q: %v, %v; want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != tc.want {
			t.Errorf("%q: %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParseFormatAndProgressMode(t *testing.T) {
	if f, err := ParseFormat("json"); err != nil || f != FormatJSON {
		t.Errorf("json: %v %v", f, err)
	}
	if f, err := ParseFormat("table"); err != nil || f != FormatTable {
		t.Errorf("table: %v %v", f, err)
	}
	if _, err := ParseFormat("yaml"); ExitCode(err) != 2 {
		t.Errorf("yaml: %v", err)
	}
	for in, want := range map[string]ProgressMode{"auto": ProgressAuto, "bar": ProgressBar, "lines": ProgressLines, "none": ProgressNone} {
		if m, err := ParseProgressMode(in); err != nil || m != want {
			t.Errorf("%s: %v %v", in, m, err)
		}
	}
	if _, err := ParseProgressMode("loud"); ExitCode(err) != 2 {
		t.Errorf("loud: %v", err)
	}
}

func TestParseOffsetSpecUsage(t *testing.T) {
	if spec, err := ParseOffsetSpec("--from", "latest"); err != nil || spec.Kind != admin.OffsetLatest {
		t.Fatalf("latest: %+v, %v", spec, err)
	}
	_, err := ParseOffsetSpec("--from", "beginning")
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "--from") {
		t.Fatalf("beginning: %v (exit %d); want a usage error naming --from", err, ExitCode(err))
	}
}
