package sasl

import (
	"errors"
	"testing"
)

func TestParseScramSpec(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want ScramSpec
		err  error
	}{
		{in: "SCRAM-SHA-256=[name=admin,password=admin-secret]", want: ScramSpec{ScramSHA256, "admin", "admin-secret", DefaultIterations}},
		{in: `SCRAM-SHA-512=[name=alice,password="a,b]=\"c",iterations=4096]`, want: ScramSpec{ScramSHA512, "alice", `a,b]="c`, 4096}},
		{in: "SCRAM-SHA-256=[name=a,password=]", want: ScramSpec{ScramSHA256, "a", "", DefaultIterations}},
		{in: "PLAIN=[name=a,password=b]", err: ErrUnsupportedMechanism},
		{in: "SCRAM-SHA-256=name=a,password=b", err: ErrMalformed},
		{in: "SCRAM-SHA-256=[password=b]", err: ErrMalformed},
		{in: "SCRAM-SHA-256=[name=a]", err: ErrMalformed},
		{in: "SCRAM-SHA-256=[name=a,password=b,salt=c]", err: ErrMalformed},
		{in: "SCRAM-SHA-256=[name=a,name=b,password=c]", err: ErrMalformed},
		{in: `SCRAM-SHA-256=[name=a,password="b]`, err: ErrMalformed},
		{in: "SCRAM-SHA-256=[name=a,password=b,iterations=10]", err: ErrIterations},
		{in: "SCRAM-SHA-256=[name=a,password=b,iterations=x]", err: ErrMalformed},
	} {
		got, err := ParseScramSpec(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s: err %v, want %v", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}
