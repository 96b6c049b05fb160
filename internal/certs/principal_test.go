package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/certs"
	"github.com/strata-stream/strata/internal/certs/certstest"
)

// TestPrincipalMappingRules: the examples of Kafka's SslPrincipalMapperTest, with
// the names Kafka gives them.
func TestPrincipalMappingRules(t *testing.T) {
	kafkaRules := strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`,
		`DEFAULT`,
	}, ", ")
	for _, tc := range []struct {
		rules, dn, want string
	}{
		{kafkaRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{kafkaRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{kafkaRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{kafkaRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{kafkaRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		// An escaped comma inside the CN, the rule's pattern holding commas.
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},
		{"DEFAULT", "CN=alice,O=strata-test", "CN=alice,O=strata-test"},
		// Whitespace and empty entries around rules are ignored.
		{"  ,, RULE:^CN=([^,]*),.*$/$1/ ,  DEFAULT , ", "CN=bob,O=x", "bob"},
		// replaceAll: the rule applies when the pattern matches the whole DN,
		// then every match is replaced, here the lazy group's empty ones.
		{"RULE:CN=(.*?)/<$1>/", "CN=a,CN=b", "<>a,<>b"},
		{"RULE:CN=(?P<user>[^,]*).*/${user}/U", "CN=straße,O=x", "STRASSE"},
		// A $ before a group number above the pattern's groups is literal, as
		// Kafka escapes it; $12 with one group is group 1 then "2".
		{"RULE:^CN=([^,]*).*$/$1$2$12/", "CN=a,O=b", "a$2a2"},
		{`RULE:^CN=([^,]*).*$/\$1 \/ \\ $0/`, "CN=a,O=b", `$1 / \ CN=a,O=b`},
		// An escaped slash in the pattern.
		{`RULE:^CN=([^,]*),OU=a\/b$/$1/`, "CN=c,OU=a/b", "c"},
		// The first rule that applies wins; the pattern must match the whole DN.
		{"RULE:CN=x/first/,RULE:^CN=x.*$/second/", "CN=x,O=y", "second"},
		{"RULE:^CN=x,O=y$/$0/L,DEFAULT", "CN=x,O=y", "cn=x,o=y"},
	} {
		m, err := certs.ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		if got, err := m.Name(tc.dn); err != nil || got != tc.want {
			t.Errorf("rules %q, DN %q: %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
	m, err := certs.ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Name("CN=x,OU=Other"); !errors.Is(err, certs.ErrNoMatchingRule) {
		t.Errorf("no rule applies: %v, want ErrNoMatchingRule", err)
	}
}

// TestPrincipalMappingRulesRefused: Kafka's invalid rules, and those Kafka
// accepts but fails at every login, are refused with the rule named.
func TestPrincipalMappingRulesRefused(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{"default", "rule 1 (`default`)"},
		{"DEFAUL", "a rule is DEFAULT or RULE"},
		{"DEFAULT/L", `unexpected "/L"`},
		{"DEFAULT/U", `unexpected "/U"`},
		{`RULE:CN=(.*?),OU=ServiceUsers.*/$1`, "no / after the replacement"},
		{`rule:^CN=(.*?),OU=ServiceUsers.*$/$1/`, "a rule is DEFAULT or RULE"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`, `unexpected "/U"`},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/L`, "no / after the replacement"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/LU`, "no / after the replacement"},
		{"RULE:x/y/Lz", `unexpected "z"`},
		{"DEFAULT,RULE:x/y", "rule 2"},
		{"", "no rule given"},
		{" , ,", "no rule given"},
		{`RULE:^CN=(\w+)\1$/$1/`, "pattern: "}, // a back reference: Java only
		{`RULE:^CN=(?=x).*$/$1/`, "pattern: "}, // lookahead
		{"RULE:^CN=x$/$1/", "the pattern has none"},
		{"RULE:^CN=(x)$/${user}/", `no group named "user"`},
		{"RULE:^CN=(x)$/a$b/", "$ must be followed"},
		{`RULE:^CN=(x)$/a\/`, "no / after the replacement"},
		{"RULE:^CN=(x)$/a${x/", "${ without }"},
	} {
		_, err := certs.ParsePrincipalMappingRules(tc.rules)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.rules, err, tc.want)
		}
	}
}

type testAVA struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}
type testRDNSET []testAVA

func str(tag int, v string) asn1.RawValue { return asn1.RawValue{Tag: tag, Bytes: []byte(v)} }

// TestDistinguishedName: subjects formatted as Java 17's
// X500Principal.getName() prints them (each expected string was printed by
// Java for the same DER bytes; interop's TestPrincipalsAsKafka compares more).
func TestDistinguishedName(t *testing.T) {
	var (
		cn, c, l, st, street = asn1.ObjectIdentifier{2, 5, 4, 3}, asn1.ObjectIdentifier{2, 5, 4, 6}, asn1.ObjectIdentifier{2, 5, 4, 7}, asn1.ObjectIdentifier{2, 5, 4, 8}, asn1.ObjectIdentifier{2, 5, 4, 9}
		o, ou, serial, title = asn1.ObjectIdentifier{2, 5, 4, 10}, asn1.ObjectIdentifier{2, 5, 4, 11}, asn1.ObjectIdentifier{2, 5, 4, 5}, asn1.ObjectIdentifier{2, 5, 4, 12}
		dc, uid, email       = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	)
	one := func(typ asn1.ObjectIdentifier, v asn1.RawValue) testRDNSET { return testRDNSET{{typ, v}} }
	const utf8, printable, ia5, t61 = asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String
	for _, tc := range []struct {
		subject []testRDNSET
		want    string
	}{
		{[]testRDNSET{one(c, str(printable, "US")), one(st, str(utf8, "MD")), one(l, str(utf8, "Fulton")), one(o, str(utf8, "mycp")), one(ou, str(utf8, "SME")), one(cn, str(utf8, "Duke"))},
			"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"},
		{[]testRDNSET{one(cn, str(utf8, "Tkac, Adam")), one(ou, str(utf8, "ITZ"))}, `OU=ITZ,CN=Tkac\, Adam`},
		{[]testRDNSET{one(cn, str(utf8, `a+b=c<d>e#f;g"h\i`))}, `CN=a\+b\=c\<d\>e\#f\;g\"h\\i`},
		{[]testRDNSET{one(cn, str(utf8, "#lead"))}, `CN=\#lead`},
		{[]testRDNSET{one(cn, str(utf8, "  two  "))}, `CN=\ \ two\ \ `},
		{[]testRDNSET{one(cn, str(utf8, " \r x\r "))}, "CN=\\ \\\r\\ x\\\r\\ "},
		{[]testRDNSET{one(cn, str(utf8, "\t x \t"))}, "CN=\t x \t"},
		{[]testRDNSET{one(cn, str(utf8, "\x00nul"))}, `CN=\00nul`},
		{[]testRDNSET{one(cn, str(utf8, "Zoë Ünïcödé 日本"))}, "CN=Zoë Ünïcödé 日本"},
		{[]testRDNSET{one(cn, asn1.RawValue{Tag: asn1.TagBMPString, Bytes: []byte{0, 'b', 0, 'm', 0, 'p'}})}, `CN=\00b\00m\00p`},
		{[]testRDNSET{one(cn, str(t61, "teletex")), one(cn, str(ia5, "ia5"))}, "CN=ia5,CN=teletex"},
		{[]testRDNSET{one(dc, str(ia5, "com")), one(dc, str(ia5, "example")), one(uid, str(utf8, "jdoe")), one(cn, str(utf8, "John"))},
			"CN=John,UID=jdoe,DC=example,DC=com"},
		{[]testRDNSET{one(email, str(ia5, "a@b.c")), one(cn, str(utf8, "mail"))}, "CN=mail,1.2.840.113549.1.9.1=#16056140622e63"},
		{[]testRDNSET{one(serial, str(printable, "1234")), one(title, str(utf8, "Boss")), one(street, str(utf8, "Main St"))},
			"STREET=Main St,2.5.4.12=#0c04426f7373,2.5.4.5=#130431323334"},
		{[]testRDNSET{{{ou, str(utf8, "unit")}, {cn, str(utf8, "multi")}}, one(o, str(utf8, "org"))}, "O=org,OU=unit+CN=multi"},
		{[]testRDNSET{one(cn, asn1.RawValue{Tag: asn1.TagInteger, Bytes: []byte{5}})}, "CN=#020105"},
		{[]testRDNSET{one(cn, asn1.RawValue{Tag: asn1.TagNumericString, Bytes: []byte("x y")})}, "CN=#1203782079"},
		{nil, ""},
	} {
		der, err := asn1.Marshal(tc.subject)
		if err != nil {
			t.Fatal(err)
		}
		got, err := certs.DistinguishedName(&x509.Certificate{RawSubject: der})
		if err != nil || got != tc.want {
			t.Errorf("DN %q, %v; want %q", got, err, tc.want)
		}
	}
	if _, err := certs.DistinguishedName(&x509.Certificate{RawSubject: []byte{0x30, 0x05, 0x31}}); err == nil {
		t.Error("a truncated subject was formatted")
	}
}

// TestMappedPrincipal: a verified certificate's principal through the rules,
// the default without them, ANONYMOUS without a certificate, and an error when
// no rule applies.
func TestMappedPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, dir, "cluster")
	node := ca.Issue(t, "node", "node-1")
	alice := ca.Issue(t, "alice", "Alice")
	srv := newReloader(t, certs.Files{CertFile: node.CertFile, KeyFile: node.KeyFile, ClientCAFile: ca.File})
	client := newReloader(t, certs.Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.File})
	states := make(chan tls.ConnectionState, 1)
	addr := serveTLSState(t, srv.ServerConfig(), states)
	if _, _, err := handshake(addr, client.DialConfig(addr)); err != nil {
		t.Fatal(err)
	}
	cs := <-states
	for _, tc := range []struct{ rules, want, err string }{
		{"", "User:Alice", ""},
		{"DEFAULT", "User:CN=Alice,O=strata-test", ""},
		{"RULE:^CN=([^,]+),O=strata-test$/$1/L", "User:alice", ""},
		{"RULE:^CN=([^,]+),O=other$/$1/", "", "no principal mapping rule applies"},
	} {
		var m *certs.PrincipalMapper
		if tc.rules != "" {
			var err error
			if m, err = certs.ParsePrincipalMappingRules(tc.rules); err != nil {
				t.Fatal(err)
			}
		}
		got, err := m.Principal(cs)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("rules %q: %q, %v; want %q, %q", tc.rules, got, err, tc.want, tc.err)
		}
		if got, err := m.Principal(tls.ConnectionState{}); got != certs.Anonymous || err != nil {
			t.Errorf("rules %q without a certificate: %q, %v", tc.rules, got, err)
		}
	}
}
