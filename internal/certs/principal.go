package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// ErrNoMatchingRule means no principal mapping rule applies to a client
// certificate's subject: the client is not authenticated (as in Kafka).
var ErrNoMatchingRule = errors.New("certs: no principal mapping rule applies")

// PrincipalMapper turns a verified client certificate into a Kafka principal
// with Kafka's ssl.principal.mapping.rules (--ssl-principal-mapping-rules).
//
// A nil *PrincipalMapper is Strata's default, "User:<subject CN>". Kafka's
// default, the rule list "DEFAULT", is the whole subject DN as
// DistinguishedName formats it.
//
// The rules are a comma-separated list, tried in order; the first that applies
// names the principal:
//
//   - DEFAULT: the DN itself;
//   - RULE:pattern/replacement/ with an optional L or U after the last slash
//     (lower or upper case the result): applies when pattern matches the whole
//     DN; the name is then the DN with every match of pattern replaced by
//     replacement, as Java's String.replaceAll does ($1 or ${name} for a
//     group, \x for a literal x). A slash or backslash inside pattern or
//     replacement is written \/ or \\. Whitespace around a rule and empty
//     entries are ignored.
//
// Patterns are Go regular expressions (RE2): the syntax they share with Java's
// behaves the same; Java's back references, lookarounds and possessive
// quantifiers are refused. Where Kafka accepts a rule that fails at the first
// login (a replacement naming a group the pattern lacks, a lone $), Strata
// refuses it when the rules are parsed.
type PrincipalMapper struct {
	rules []mappingRule
}

// mappingRule is one parsed rule; isDefault, or a pattern with its expansion.
type mappingRule struct {
	isDefault bool
	whole     *regexp.Regexp // the pattern anchored at both ends: whether it applies
	re        *regexp.Regexp // the pattern as written: what is replaced
	expansion []replacementPart
	fold      byte // 'L' or 'U': lower or upper case the result
}

// replacementPart is a literal, or a group's text when group >= 0.
type replacementPart struct {
	literal string
	group   int
}

// ParsePrincipalMappingRules parses a rule list (see PrincipalMapper). A list
// with no rule at all is refused: every client would be refused.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	p := ruleParser{s: strings.TrimSpace(s)}
	m := &PrincipalMapper{}
	for n := 1; ; n++ {
		p.skipSpace()
		if p.done() {
			break
		}
		if p.peek() == ',' { // an empty entry
			p.i++
			continue
		}
		start := p.i
		r, err := p.rule()
		if err == nil {
			p.skipSpace()
			if !p.done() && p.peek() != ',' {
				end := strings.IndexByte(p.s[p.i:], ',')
				if end < 0 {
					end = len(p.s) - p.i
				}
				err = fmt.Errorf("unexpected %q after the rule", p.s[p.i:p.i+end])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ssl principal mapping rule %d (%s): %w", n, abbreviate(p.s[start:]), err)
		}
		m.rules = append(m.rules, r)
		if !p.done() {
			p.i++ // the comma
		}
	}
	if len(m.rules) == 0 {
		return nil, errors.New("ssl principal mapping rules: no rule given (DEFAULT is the whole DN)")
	}
	return m, nil
}

func abbreviate(s string) string {
	if len(s) > 60 {
		return "`" + s[:60] + "...`"
	}
	return "`" + s + "`"
}

type ruleParser struct {
	s string
	i int
}

func (p *ruleParser) done() bool { return p.i >= len(p.s) }
func (p *ruleParser) peek() byte { return p.s[p.i] }

func (p *ruleParser) skipSpace() {
	for !p.done() && strings.IndexByte(" \t\n\v\f\r", p.peek()) >= 0 {
		p.i++
	}
}

// rule parses DEFAULT or RULE:pattern/replacement/[LU] at p.i.
func (p *ruleParser) rule() (mappingRule, error) {
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "DEFAULT"):
		p.i += len("DEFAULT")
		return mappingRule{isDefault: true}, nil
	case !strings.HasPrefix(rest, "RULE:"):
		return mappingRule{}, errors.New("a rule is DEFAULT or RULE:pattern/replacement/[LU]")
	}
	p.i += len("RULE:")
	pattern, ok := p.upToSlash()
	if !ok {
		return mappingRule{}, errors.New("no / after the pattern")
	}
	replacement, ok := p.upToSlash()
	if !ok {
		return mappingRule{}, errors.New("no / after the replacement")
	}
	r := mappingRule{}
	if !p.done() {
		if c := p.peek(); c == 'L' || c == 'U' {
			r.fold = c
			p.i++
		}
	}
	var err error
	if r.re, err = regexp.Compile(pattern); err != nil {
		return r, fmt.Errorf("pattern: %w", err)
	}
	if r.whole, err = regexp.Compile(`\A(?:` + pattern + `)\z`); err != nil {
		return r, fmt.Errorf("pattern: %w", err)
	}
	r.expansion, err = parseReplacement(replacement, r.re)
	return r, err
}

// upToSlash returns the text up to the next slash not escaped by a backslash,
// escapes kept, and moves past the slash.
func (p *ruleParser) upToSlash() (string, bool) {
	start := p.i
	for !p.done() {
		switch p.peek() {
		case '\\':
			p.i += 2
		case '/':
			p.i++
			return p.s[start : p.i-1], true
		default:
			p.i++
		}
	}
	p.i = len(p.s)
	return "", false
}

// parseReplacement reads a java.util.regex replacement: $n (the longest run of
// digits naming a group of re; as in Kafka, a $ before a first digit above the
// group count is literal), ${name}, and \x for x.
func parseReplacement(s string, re *regexp.Regexp) ([]replacementPart, error) {
	var parts []replacementPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("replacement: a \\ at its end escapes nothing")
			}
			i++
			lit.WriteByte(s[i])
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, errors.New("replacement: ${ without }")
			}
			name := s[i+2 : i+end]
			g := re.SubexpIndex(name)
			if g < 0 {
				return nil, fmt.Errorf("replacement: the pattern has no group named %q", name)
			}
			flush()
			parts = append(parts, replacementPart{group: g})
			i += end
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			g := int(s[i+1] - '0')
			if g > groups {
				if groups == 0 {
					return nil, fmt.Errorf("replacement: $%d names a group, the pattern has none", g)
				}
				lit.WriteByte('$') // Kafka treats it as literal text
				continue
			}
			j := i + 2
			for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
				next, _ := strconv.Atoi(s[i+1 : j+1])
				if next > groups {
					break
				}
				g = next
			}
			flush()
			parts = append(parts, replacementPart{group: g})
			i = j - 1
		case c == '$':
			return nil, errors.New("replacement: $ must be followed by a group number or {name} (\\$ for a literal $)")
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// apply returns the rule's name for dn, or false when it does not apply.
func (r *mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, m := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:m[0]])
		for _, part := range r.expansion {
			if part.group < 0 {
				b.WriteString(part.literal)
			} else if lo := m[2*part.group]; lo >= 0 {
				b.WriteString(dn[lo:m[2*part.group+1]])
			}
		}
		last = m[1]
	}
	b.WriteString(dn[last:])
	// As Java's toLowerCase and toUpperCase with Locale.ENGLISH (ß -> SS, say).
	// A Caser keeps state, so each call gets its own.
	switch r.fold {
	case 'L':
		return cases.Lower(language.English).String(b.String()), true
	case 'U':
		return cases.Upper(language.English).String(b.String()), true
	}
	return b.String(), true
}

// Name maps a subject DN to a principal name with the rules.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for i := range m.rules {
		if name, ok := m.rules[i].apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %q", ErrNoMatchingRule, dn)
}

// Principal is the Kafka principal of a TLS connection: Anonymous without a
// verified client certificate, else "User:" and the certificate's subject CN
// (nil m) or its DN mapped by the rules.
func (m *PrincipalMapper) Principal(cs tls.ConnectionState) (string, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	cert := cs.PeerCertificates[0]
	if m == nil {
		return "User:" + cert.Subject.CommonName, nil
	}
	dn, err := DistinguishedName(cert)
	if err != nil {
		return "", err
	}
	name, err := m.Name(dn)
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}
