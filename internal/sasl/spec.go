package sasl

import (
	"fmt"
	"strconv"
	"strings"
)

// ScramSpec is one user credential in Kafka's kafka-storage --add-scram syntax:
//
//	SCRAM-SHA-256=[name=admin,password=admin-secret]
//	SCRAM-SHA-512=[name=alice,password="a,b=c",iterations=8192]
//
// Values may be double-quoted to hold ',', ']' or '"' (written \").
type ScramSpec struct {
	Mechanism  Mechanism
	Name       string
	Password   string
	Iterations int32 // DefaultIterations when not given
}

// ParseScramSpec parses one --add-scram value.
func ParseScramSpec(s string) (ScramSpec, error) {
	mech, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return ScramSpec{}, fmt.Errorf("%w: %q: want MECHANISM=[name=...,password=...]", ErrMalformed, s)
	}
	spec := ScramSpec{Mechanism: Mechanism(mech), Iterations: DefaultIterations}
	if _, ok := scramHashFor(spec.Mechanism); !ok {
		return ScramSpec{}, fmt.Errorf("%w: %q is not SCRAM-SHA-256 or SCRAM-SHA-512", ErrUnsupportedMechanism, mech)
	}
	fields, err := splitFields(rest[1 : len(rest)-1])
	if err != nil {
		return ScramSpec{}, fmt.Errorf("%w: %q: %v", ErrMalformed, s, err)
	}
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		if seen[k] {
			return ScramSpec{}, fmt.Errorf("%w: %q: %s given twice", ErrMalformed, s, k)
		}
		seen[k] = true
		if v, err = unquote(v); err != nil {
			return ScramSpec{}, fmt.Errorf("%w: %q: %v", ErrMalformed, s, err)
		}
		switch k {
		case "name":
			spec.Name = v
		case "password":
			spec.Password = v
		case "iterations":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return ScramSpec{}, fmt.Errorf("%w: %q: iterations %q", ErrMalformed, s, v)
			}
			spec.Iterations = int32(n)
		default:
			return ScramSpec{}, fmt.Errorf("%w: %q: unknown field %q (want name, password, iterations)", ErrMalformed, s, k)
		}
	}
	if spec.Name == "" || !seen["password"] {
		return ScramSpec{}, fmt.Errorf("%w: %q: name and password are required", ErrMalformed, s)
	}
	if err := CheckIterations(spec.Iterations); err != nil {
		return ScramSpec{}, err
	}
	return spec, nil
}

// splitFields splits at commas outside double quotes.
func splitFields(s string) ([]string, error) {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	return append(out, s[start:]), nil
}

// unquote strips surrounding double quotes and undoes \" and \\ inside them.
func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, `"`) {
		return v, nil
	}
	if len(v) < 2 || !strings.HasSuffix(v, `"`) {
		return "", fmt.Errorf("bad quoting in %s", v)
	}
	var b strings.Builder
	in := v[1 : len(v)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == '\\' && i+1 < len(in) {
			i++
		}
		b.WriteByte(in[i])
	}
	return b.String(), nil
}
