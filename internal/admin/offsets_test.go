package admin

import (
	"testing"
	"time"
)

func TestParseOffsetSpec(t *testing.T) {
	may1 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, tc := range []struct {
		in      string
		want    OffsetSpec
		invalid bool
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
		{in: "", invalid: true},
		{in: "-1", invalid: true},
		{in: "@", invalid: true},
		{in: "@-5", invalid: true},
		{in: "beginning", invalid: true},
		{in: "2024-05-01", invalid: true},
		{in: "1960-01-01T00:00:00Z", invalid: true},
	} {
		got, err := ParseOffsetSpec(tc.in)
		if tc.invalid {
			if err == nil {
				t.Errorf("%q: got %+v; want an error", tc.in, got)
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
		s, err := ParseOffsetSpec(in)
		if err != nil || s.String() != want {
			t.Errorf("%q: %q, %v; want %q", in, s.String(), err, want)
		}
	}
}
