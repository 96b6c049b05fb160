package config

import (
	"strconv"
	"time"
)

// Small pflag.Value adapters so one option table binds flags, env and file keys.

type stringValue struct{ p *string }

func (v stringValue) String() string     { return *v.p }
func (v stringValue) Set(s string) error { *v.p = s; return nil }
func (v stringValue) Type() string       { return "string" }

type int32Value struct{ p *int32 }

func (v int32Value) String() string { return strconv.FormatInt(int64(*v.p), 10) }
func (v int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return err
	}
	*v.p = int32(n)
	return nil
}
func (v int32Value) Type() string { return "int32" }

type int64Value struct{ p *int64 }

func (v int64Value) String() string { return strconv.FormatInt(*v.p, 10) }
func (v int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}
func (v int64Value) Type() string { return "int64" }

type boolValue struct{ p *bool }

func (v boolValue) String() string { return strconv.FormatBool(*v.p) }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = b
	return nil
}
func (v boolValue) Type() string     { return "bool" }
func (v boolValue) IsBoolFlag() bool { return true }

type durationValue struct{ p *time.Duration }

func (v durationValue) String() string { return v.p.String() }
func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}
func (v durationValue) Type() string { return "duration" }
