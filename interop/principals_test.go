package interop

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/interop/kafkatools"
)

type principalAVA struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}
type principalRDNSET []principalAVA

// TestPrincipalsAsKafka: random certificate subjects (values full of the
// characters RFC 2253 escapes, several string types, multi-valued RDNs, named
// and unnamed attribute types) through several rule lists, each mapped by
// Strata (certs.DistinguishedName and PrincipalMapper) and by Kafka 4.4's own
// SslPrincipalMapper over Java's X500Principal.getName()
// (interop/principals/Principals.java): the names must be the same, and a
// subject no rule applies to must be refused by both.
func TestPrincipalsAsKafka(t *testing.T) {
	kafkatools.Require(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ruleLists := []string{
		"DEFAULT",
		`RULE:^CN=([^,]*),.*$/$1/L,DEFAULT`,
		`RULE:^(.*?)=(.*?)(,.*)?$/$2@$1/U,DEFAULT`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/`,
		`RULE:(\w+)=/<$1>/`,
		`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,RULE:^O=(?<org>[^,]*).*$/${org}-$0/`,
	}
	var input bytes.Buffer
	type mapped struct{ name, err string }
	var want []mapped
	for range 300 {
		subject := randomSubject(rng)
		for _, rules := range ruleLists {
			fmt.Fprintf(&input, "%x %x\n", subject, rules)
			m, err := certs.ParsePrincipalMappingRules(rules)
			if err != nil {
				t.Fatalf("%q: %v", rules, err)
			}
			dn, err := certs.DistinguishedName(&x509.Certificate{RawSubject: subject})
			if err != nil {
				t.Fatalf("subject %x: %v", subject, err)
			}
			name, err := m.Name(dn)
			switch {
			case errors.Is(err, certs.ErrNoMatchingRule):
				want = append(want, mapped{err: "no rule"})
			case err != nil:
				t.Fatal(err)
			default:
				want = append(want, mapped{name: name})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", filepath.Join(kafkatools.JarsDir(), "*"), filepath.Join("principals", "Principals.java"))
	cmd.Stdin = &input
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("java printed %d lines for %d cases:\n%s\n%s", len(lines), len(want), stderr.String(), strings.Join(lines[:min(len(lines), 30)], "\n"))
	}
	cases := strings.Split(input.String(), "\n")
	for i, line := range lines {
		var got mapped
		if strings.HasPrefix(line, "ERR ") {
			if !strings.Contains(line, "NoMatchingRule") {
				t.Errorf("case %s: Kafka failed: %s", cases[i], line)
				continue
			}
			got.err = "no rule"
		} else {
			b, err := hex.DecodeString(line)
			if err != nil {
				t.Fatalf("java printed %q", line)
			}
			got.name = string(b)
		}
		if got != want[i] {
			subject, rules, _ := strings.Cut(cases[i], " ")
			r, _ := hex.DecodeString(rules)
			dn, _ := hex.DecodeString(subject)
			strataDN, _ := certs.DistinguishedName(&x509.Certificate{RawSubject: dn})
			t.Errorf("subject %s (Strata's DN %q), rules %q: Kafka %+v, Strata %+v", subject, strataDN, r, got, want[i])
		}
	}
}

// randomSubject is the DER of a subject of 1-5 RDNs, some multi-valued.
func randomSubject(rng *rand.Rand) []byte {
	types := []asn1.ObjectIdentifier{
		{2, 5, 4, 3}, {2, 5, 4, 6}, {2, 5, 4, 7}, {2, 5, 4, 8}, {2, 5, 4, 9}, {2, 5, 4, 10}, {2, 5, 4, 11},
		{0, 9, 2342, 19200300, 100, 1, 25}, {0, 9, 2342, 19200300, 100, 1, 1},
		{2, 5, 4, 5}, {2, 5, 4, 12}, {1, 2, 840, 113549, 1, 9, 1},
	}
	// Carriage returns are left out: Java's '.' does not match one, Go's does
	// (written in docs/security.md); TestDistinguishedName formats them.
	chars := []rune(`aZk09 ,+"\<>;=#-_.@/éß日` + "\x00\t")
	value := func() asn1.RawValue {
		n := rng.IntN(8)
		var b strings.Builder
		ascii := true
		for range n {
			r := chars[rng.IntN(len(chars))]
			ascii = ascii && r < 0x80
			b.WriteRune(r)
		}
		tag := asn1.TagUTF8String
		if ascii && rng.IntN(3) == 0 {
			tag = asn1.TagIA5String
		}
		return asn1.RawValue{Tag: tag, Bytes: []byte(b.String())}
	}
	var rdns []principalRDNSET
	for range 1 + rng.IntN(5) {
		var rdn principalRDNSET
		for range 1 + rng.IntN(3)/2 {
			rdn = append(rdn, principalAVA{types[rng.IntN(len(types))], value()})
		}
		rdns = append(rdns, rdn)
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		panic(err)
	}
	return der
}
