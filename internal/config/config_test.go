package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func resolve(t *testing.T, args []string, env map[string]string, file string) (Config, error) {
	t.Helper()
	c := Default()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	path := c.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if file != "" {
		p := filepath.Join(t.TempDir(), "strata.json")
		if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		*path = p
	}
	err := c.Resolve(fs, *path, func(k string) string { return env[k] })
	return c, err
}

func TestResolvePrecedence(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		wantID  int32
		wantDir string
	}{
		{name: "defaults", wantID: 1, wantDir: "./data"},
		{name: "file", file: `{"node-id": 7, "data-dir": "/f"}`, wantID: 7, wantDir: "/f"},
		{name: "env beats file", file: `{"node-id": 7}`, env: map[string]string{"STRATA_NODE_ID": "8"}, wantID: 8, wantDir: "./data"},
		{name: "flag beats env", args: []string{"--node-id=9"}, env: map[string]string{"STRATA_NODE_ID": "8"}, wantID: 9, wantDir: "./data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolve(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if c.NodeID != tt.wantID || c.DataDir != tt.wantDir {
				t.Fatalf("got node %d dir %q, want %d %q", c.NodeID, c.DataDir, tt.wantID, tt.wantDir)
			}
			if c.AdvertisedKafkaAddr != c.KafkaAddr {
				t.Fatalf("advertised address %q not defaulted to %q", c.AdvertisedKafkaAddr, c.KafkaAddr)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		wantErr string
	}{
		{name: "bad env int", env: map[string]string{"STRATA_NODE_ID": "x"}, wantErr: "STRATA_NODE_ID"},
		{name: "unknown file key", file: `{"nodeid": 1}`, wantErr: `unknown key "nodeid"`},
		{name: "bad json", file: `{`, wantErr: "config file"},
		{name: "bad addr", args: []string{"--kafka-addr=nope"}, wantErr: "kafka-addr"},
		{name: "bad advertised controller addr", args: []string{"--advertised-controller-addr=nope"}, wantErr: "advertised-controller-addr"},
		{name: "advertised controller port 0", args: []string{"--advertised-controller-addr=10.0.0.1:0"}, wantErr: "not 0"},
		{name: "controller source not an IP", args: []string{"--controller-source-host=host.example"}, wantErr: "controller-source-host"},
		{name: "kafka source not an IP", args: []string{"--kafka-source-host=host.example"}, wantErr: "kafka-source-host"},
		{name: "bad level", args: []string{"--log-level=loud"}, wantErr: "log-level"},
		{name: "bad format", args: []string{"--log-format=xml"}, wantErr: "log-format"},
		{name: "bad voters", args: []string{"--controllers=1@a:1,x"}, wantErr: "controllers"},
		{name: "dup voters", args: []string{"--controllers=1@a:1,1@b:2"}, wantErr: "twice"},
		{name: "partitions", args: []string{"--default-partitions=0"}, wantErr: "default-partitions"},
		{name: "bad role", args: []string{"--roles=broker,witness"}, wantErr: "roles"},
		{name: "voter not listed", args: []string{"--node-id=3", "--controllers=1@a:1,2@b:2"}, wantErr: "not among --controllers"},
		{name: "broker alone", args: []string{"--roles=broker", "--cluster-id=c"}, wantErr: "needs --controllers"},
		{name: "broker listed", args: []string{"--roles=broker", "--cluster-id=c", "--controllers=1@a:1"}, wantErr: "no controller role"},
		{name: "broker without cluster id", args: []string{"--roles=broker", "--node-id=4", "--controllers=1@a:1"}, wantErr: "--cluster-id"},
		{name: "queued below frame", args: []string{"--max-queued-request-bytes=1024"}, wantErr: "max-queued-request-bytes"},
		{name: "connections zero", args: []string{"--max-connections=0"}, wantErr: "max-connections"},
		{name: "transactional id expiration zero", args: []string{"--transactional-id-expiration=0s"}, wantErr: "transactional-id-expiration"},
		{name: "tls cert without key", args: []string{"--tls-cert-file=a.pem"}, wantErr: "tls-key-file"},
		{name: "tls client ca alone", args: []string{"--tls-client-ca-file=ca.pem"}, wantErr: "tls-client-ca-file"},
		{name: "sasl unknown mechanism", args: []string{"--sasl-mechanisms=GSSAPI"}, wantErr: "sasl-mechanisms"},
		{name: "sasl plain without tls", args: []string{"--sasl-mechanisms=PLAIN"}, wantErr: "--sasl-plain-without-tls"},
		{name: "bad add-scram", args: []string{"--add-scram=SCRAM-SHA-256=[name=a]"}, wantErr: "add-scram"},
		{name: "inter-broker mechanism off", args: []string{"--sasl-mechanisms=SCRAM-SHA-256", "--inter-broker-sasl=SCRAM-SHA-512=[name=b,password=p]"}, wantErr: "inter-broker-sasl"},
		{name: "oauthbearer without jwks", args: []string{"--sasl-mechanisms=OAUTHBEARER"}, wantErr: "oauthbearer-jwks"},
		{name: "authorizer", args: []string{"--authorizer=simple"}, wantErr: "authorizer"},
		{name: "super user", args: []string{"--super-users=admin"}, wantErr: "super-users"},
		{name: "per-ip negative", args: []string{"--max-connections-per-ip=-2"}, wantErr: "max-connections-per-ip"},
		{name: "connection creation rate zero", args: []string{"--max-connection-creation-rate=0"}, wantErr: "max-connection-creation-rate"},
		{name: "fetch session slots negative", args: []string{"--max-incremental-fetch-session-cache-slots=-1"}, wantErr: "max-incremental-fetch-session-cache-slots"},
		{name: "replica selector", args: []string{"--replica-selector-class=LeaderSelector"}, wantErr: "replica-selector-class"},
		{name: "mapping rules without client certificates", args: []string{"--tls-cert-file=a.pem", "--tls-key-file=a-key.pem", "--ssl-principal-mapping-rules=DEFAULT"}, wantErr: "ssl-principal-mapping-rules needs tls-client-ca-file"},
		{name: "bad mapping rule", args: []string{"--tls-cert-file=a.pem", "--tls-key-file=a-key.pem", "--tls-client-ca-file=ca.pem", "--ssl-principal-mapping-rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U"}, wantErr: "ssl principal mapping rule 1"},
		{name: "mapping rule group", args: []string{"--tls-cert-file=a.pem", "--tls-key-file=a-key.pem", "--tls-client-ca-file=ca.pem", "--ssl-principal-mapping-rules=DEFAULT,RULE:^CN=x$/$1/"}, wantErr: "rule 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(t, tt.args, tt.env, tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestRoles(t *testing.T) {
	for _, tt := range []struct {
		args               []string
		broker, controller bool
	}{
		{nil, true, true},
		{[]string{"--roles=controller"}, false, true},
		{[]string{"--roles=controller, broker"}, true, true},
		{[]string{"--roles=broker", "--node-id=4", "--controllers=1@a:1", "--cluster-id=c"}, true, false},
	} {
		c, err := resolve(t, tt.args, nil, "")
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if c.IsBroker() != tt.broker || c.IsController() != tt.controller {
			t.Errorf("%v: broker %v controller %v, want %v %v", tt.args, c.IsBroker(), c.IsController(), tt.broker, tt.controller)
		}
	}
}

func TestVoters(t *testing.T) {
	c := Default()
	v, err := c.Voters()
	if err != nil || len(v) != 1 || v[0].ID != 1 || v[0].Addr != c.ControllerAddr {
		t.Fatalf("single node voters = %v, %v", v, err)
	}
	c.Controllers = "1@127.0.0.1:1, 2@127.0.0.2:2"
	v, err = c.Voters()
	if err != nil || len(v) != 2 || v[1].ID != 2 || v[1].Addr != "127.0.0.2:2" {
		t.Fatalf("voters = %v, %v", v, err)
	}
}

// TestConnectionTimeouts: connections.max.idle.ms, the request body bound and
// the HTTP write timeout have Kafka's and Strata's defaults, are set from the
// file, the environment and flags, and 0 turns them off (a negative value is
// refused).
func TestConnectionTimeouts(t *testing.T) {
	tests := []struct {
		name                          string
		args                          []string
		env                           map[string]string
		file                          string
		wantIdle, wantBody, wantWrite time.Duration
		wantErr                       string
	}{
		{name: "defaults", wantIdle: 10 * time.Minute, wantBody: 30 * time.Second, wantWrite: 30 * time.Second},
		{name: "file", file: `{"connections-max-idle": "90s", "request-body-timeout": "5s", "http-write-timeout": "2s"}`, wantIdle: 90 * time.Second, wantBody: 5 * time.Second, wantWrite: 2 * time.Second},
		{name: "env", env: map[string]string{"STRATA_CONNECTIONS_MAX_IDLE": "1m"}, wantIdle: time.Minute, wantBody: 30 * time.Second, wantWrite: 30 * time.Second},
		{name: "off", args: []string{"--connections-max-idle=0", "--request-body-timeout=0", "--http-write-timeout=0"}},
		{name: "negative idle", args: []string{"--connections-max-idle=-1s"}, wantErr: "connections-max-idle"},
		{name: "negative body", args: []string{"--request-body-timeout=-1s"}, wantErr: "request-body-timeout"},
		{name: "negative write", args: []string{"--http-write-timeout=-1s"}, wantErr: "http-write-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolve(t, tt.args, tt.env, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ConnectionsMaxIdle != tt.wantIdle || c.RequestBodyTimeout != tt.wantBody || c.HTTPWriteTimeout != tt.wantWrite {
				t.Fatalf("idle %v body %v write %v, want %v %v %v", c.ConnectionsMaxIdle, c.RequestBodyTimeout, c.HTTPWriteTimeout, tt.wantIdle, tt.wantBody, tt.wantWrite)
			}
		})
	}
}
