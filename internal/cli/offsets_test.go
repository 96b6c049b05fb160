package cli

import (
	"testing"
	"time"
)

func TestParseOffsetSpec(t *testing.T) {
	may1 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, tc := range []struct {
		in    string
		want  OffsetSpec
		usage bool
	}{
		{in: "earliest", want: OffsetSpec{Kind: OffsetEarliest}},
		{in: "latest", want: OffsetSpec{Kind: OffsetLatest}},
		{in: "0", want: OffsetSpec{Kind: OffsetExact}},
		{in: "42", want: OffsetSpec{Kind: OffsetExact, Offset: 42}},
		{in: "999999999999", want: OffsetSpec{Kind: OffsetExact, Offset: 999_999_999_999}},
		{in: "1000000000000", want: OffsetSpec{Kind: OffsetTime, Millis: 1_000_000_000_000}},
		{in: "@5", want: OffsetSpec{Kind: OffsetTime, Millis: 5}},
		{in: "2024-05-01T12:00:00Z", want: OffsetSpec{Kind: OffsetTime, Millis: may1}},
		{in: "2024-05-01T14:00:00+02:00", want: OffsetSpec{Kind: OffsetTime, Millis: may1}},
		{in: "2024-05-01T12:00:00.250Z", want: OffsetSpec{Kind: OffsetTime, Millis: may1 + 250}},
		{in: "", usage: true},
		{in: "-1", usage: true},
		{in: "@", usage: true},
		{in: "@-5", usage: true},
		{in: "beginning", usage: true},
		{in: "2024-05-01", usage: true},
		{in: "1960-01-01T00:00:00Z", usage: true},
	} {
		got, err := ParseOffsetSpec("--from", tc.in)
		if tc.usage {
			if ExitCode(err) != 2 {
				t.Errorf("%q: got %+v, %v; want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestOffsetSpecString(t *testing.T) {
	for in, want := range map[string]string{
		"earliest":       "earliest",
		"latest":         "latest",
		"17":             "17",
		"@1714564800000": "2024-05-01T12:00:00Z",
	} {
		s, err := ParseOffsetSpec("--to", in)
		if err != nil || s.String() != want {
			t.Errorf("%q: %q, %v; want %q", in, s.String(), err, want)
		}
	}
}
