package certs

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
)

// DistinguishedName formats a certificate's subject as Java's
// X500Principal.getName() does (RFC 2253), the string Kafka's
// ssl.principal.mapping.rules are applied to:
//
//   - RDNs from the last encoded to the first ("CN=alice,OU=eng,O=corp,C=US"),
//     the values of a multi-valued RDN joined by '+' in their encoded order;
//   - the attribute types CN, C, L, ST, STREET, O, OU, DC and UID by name, every
//     other one as its dotted OID;
//   - a named type's string value (UTF8String, PrintableString, IA5String,
//     TeletexString, BMPString, GeneralString) with ',', '+', '"', '\', '<',
//     '>', ';', '=' and '#' escaped by a backslash, NUL as "\00", and spaces and
//     carriage returns at either end escaped; any other value as '#' and the
//     lowercase hex of its DER encoding.
//
// Like Java, every string type's bytes are read as UTF-8, so a BMPString's
// NULs show as "\00". Where they are not valid UTF-8, each bad byte becomes
// U+FFFD (Java sometimes folds a bad sequence into one).
func DistinguishedName(cert *x509.Certificate) (string, error) {
	var rdns []rdnSET
	rest, err := asn1.Unmarshal(cert.RawSubject, &rdns)
	if err != nil {
		return "", fmt.Errorf("certs: subject: %w", err)
	}
	if len(rest) != 0 {
		return "", fmt.Errorf("certs: subject: %d trailing bytes", len(rest))
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, ava := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			name, named := rfc2253Names[ava.Type.String()]
			if !named {
				name = ava.Type.String()
			}
			b.WriteString(name)
			b.WriteByte('=')
			if named && ava.Value.Class == asn1.ClassUniversal && javaStringTags[ava.Value.Tag] {
				writeEscaped(&b, string(ava.Value.Bytes))
			} else {
				b.WriteByte('#')
				b.WriteString(hex.EncodeToString(ava.Value.FullBytes))
			}
		}
	}
	return b.String(), nil
}

// rdnSET is one relative distinguished name: encoding/asn1 reads a slice type
// whose name ends in SET as an ASN.1 SET OF.
type rdnSET []rawAVA

// rawAVA keeps an attribute's value undecoded, for its tag and DER bytes.
type rawAVA struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rfc2253Names are the attribute types Java names in RFC 2253 output.
var rfc2253Names = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET",
	"2.5.4.10": "O", "2.5.4.11": "OU",
	"0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}

// javaStringTags are the universal tags whose values Java prints as strings
// (checked against Java 17's X500Principal).
var javaStringTags = map[int]bool{
	asn1.TagUTF8String: true, asn1.TagPrintableString: true, asn1.TagT61String: true,
	asn1.TagIA5String: true, 27 /* GeneralString */ : true, asn1.TagBMPString: true,
}

// writeEscaped writes v with RFC 2253's escapes as Java applies them.
func writeEscaped(b *strings.Builder, v string) {
	edge := func(r rune) bool { return r == ' ' || r == '\r' }
	lead := len(v) - len(strings.TrimLeftFunc(v, edge))
	trail := len(strings.TrimRightFunc(v, edge))
	for i, r := range v {
		switch {
		case r == 0:
			b.WriteString(`\00`)
			continue
		case strings.ContainsRune(`,+"\<>;=#`, r), i < lead, i >= trail:
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}
