package server

import (
	"net"
	"testing"

	"github.com/strata-stream/strata/internal/config"
)

func TestAdvertisedHTTPAddr(t *testing.T) {
	tests := []struct {
		advertisedHTTP, advertisedKafka, bound, want string
	}{
		{"", "127.0.0.1:9092", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"", "broker-1.example:9092", "0.0.0.0:8080", "broker-1.example:8080"},
		{"", "[fd00::1]:9092", "[::]:8081", "[fd00::1]:8081"},
		{"lb.example:80", "broker-1.example:9092", "0.0.0.0:8080", "lb.example:80"},
	}
	for _, tc := range tests {
		cfg := config.Config{AdvertisedHTTPAddr: tc.advertisedHTTP, AdvertisedKafkaAddr: tc.advertisedKafka}
		bound, err := net.ResolveTCPAddr("tcp", tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := advertisedHTTPAddr(cfg, bound); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc, got, tc.want)
		}
	}
}
