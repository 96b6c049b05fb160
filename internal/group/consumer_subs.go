package group

import (
	"regexp"
	"slices"
	"time"
)

// This file counts what a consumer group's members subscribe to, so that a
// heartbeat learns the group's subscribed topics (to notice one created,
// deleted or grown, and for the classic view) without walking the members.
// Name subscriptions are counted per topic. Patterns are counted per distinct
// pattern, members sharing one counted once; a pattern is resolved when it is
// new and again only when the catalog's topic names change, and keeps what it
// resolved to, as Kafka's ResolvedRegularExpression (record type 16,
// consumer_records.go). Every change to cg.members or to a member's
// subscription goes through addMember, removeMember or subscribe; renaming a
// member (a static member replaced) changes neither.

// subscriptions counts a consumer group's subscriptions.
type subscriptions struct {
	names    map[string]int           // topic -> members subscribing to it by name
	patterns map[string]*patternCount // pattern -> members subscribing with it
	matched  map[string]struct{}      // topics the patterns match; nil: resolve again
	version  uint64                   // the catalog's TopicNamesVersion matched was resolved at
	// dropped holds the patterns no member uses any more since the
	// group-level records were last compared (their records go).
	dropped map[string]struct{}
	// describe is, during a member's heartbeat, whether its principal may
	// DESCRIBE a topic: patterns resolve in that member's context only, to
	// the topics it may see, as Kafka's TopicRegexResolver does. Outside a
	// heartbeat it is nil and patterns only lose the topics deleted since.
	describe func(topic string) bool
}

// patternCount is one distinct subscription pattern, its members and what it
// resolved to (Kafka's ResolvedRegularExpression, written as record type 16).
type patternCount struct {
	re      *regexp.Regexp
	members int
	// resolved is set once topics holds what the pattern matched when the
	// catalog's TopicNamesVersion was version, at time at; checked is the
	// version it was last found the same at.
	resolved bool
	topics   []string // sorted
	version  uint64
	at       time.Time
	checked  uint64
}

func newSubscriptions() subscriptions {
	return subscriptions{names: make(map[string]int), patterns: make(map[string]*patternCount)}
}

// addMember adds m, with what it subscribes to.
func (cg *consumerGroup) addMember(m *cmember) {
	cg.members[m.id] = m
	cg.subs.count(m, 1)
}

// removeMember removes m and its subscription.
func (cg *consumerGroup) removeMember(m *cmember) {
	delete(cg.members, m.id)
	cg.subs.count(m, -1)
}

// subscribe makes names (sorted) and the pattern regex, compiled as re ("" and
// nil for none), m's subscription.
func (cg *consumerGroup) subscribe(m *cmember, names []string, regex string, re *regexp.Regexp) {
	cg.subs.count(m, -1)
	m.topicNames, m.regex, m.re = names, regex, re
	cg.subs.count(m, 1)
}

// count adds delta members to each of m's subscriptions, dropping the counts
// that reach zero.
func (s *subscriptions) count(m *cmember, delta int) {
	for _, t := range m.topicNames {
		if s.names[t] += delta; s.names[t] <= 0 {
			delete(s.names, t)
		}
	}
	if m.regex == "" {
		return
	}
	p := s.patterns[m.regex]
	if p == nil {
		p = &patternCount{re: m.re}
		s.patterns[m.regex] = p
		s.matched = nil
		delete(s.dropped, m.regex)
	}
	if p.members += delta; p.members <= 0 {
		delete(s.patterns, m.regex)
		s.matched = nil
		if s.dropped == nil {
			s.dropped = map[string]struct{}{}
		}
		s.dropped[m.regex] = struct{}{}
	}
}

// matchedTopics returns the topics of cat some pattern matches, resolving
// each pattern again, during a heartbeat (s.describe set), when the catalog's
// version moved; changed reports that a pattern was resolved for the first
// time or to other topics (it takes the version and time now then).
func (s *subscriptions) matchedTopics(cat TopicCatalog, now time.Time) (matched map[string]struct{}, changed bool) {
	if len(s.patterns) == 0 {
		return nil, false
	}
	version := cat.TopicNamesVersion()
	if s.matched != nil && version == s.version {
		return s.matched, false
	}
	var names []string
	for _, p := range s.patterns {
		if p.resolved && p.checked == version || s.describe == nil && !p.resolved {
			continue
		}
		allow := s.describe
		if allow == nil { // outside a heartbeat: only drop the topics that went
			prev := p.topics
			allow = func(t string) bool { _, ok := slices.BinarySearch(prev, t); return ok }
		}
		if names == nil {
			names = cat.TopicNames()
		}
		if topics := p.match(names, allow); !p.resolved || !slices.Equal(topics, p.topics) {
			p.resolved, p.topics, p.version, p.at = true, topics, version, now
			changed = true
		}
		if s.describe != nil {
			p.checked = version
		}
	}
	matched = make(map[string]struct{})
	for _, p := range s.patterns {
		for _, t := range p.topics {
			matched[t] = struct{}{}
		}
	}
	if s.describe != nil { // resolved at version: kept until it moves
		s.matched, s.version = matched, version
	}
	return matched, changed
}

// match returns the names the pattern matches that describable allows, sorted.
func (p *patternCount) match(names []string, describable func(topic string) bool) []string {
	topics := []string{}
	for _, t := range names {
		if p.re.MatchString(t) && describable(t) {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	return topics
}

// eachSubscribedLocked calls add with every topic the group subscribes to: each
// name a member subscribes to, whether or not it exists, and each existing topic
// a pattern matches (a topic may come twice).
func (g *group) eachSubscribedLocked(add func(topic string)) {
	for t := range g.cg.subs.names {
		add(t)
	}
	for t := range g.matchedTopicsLocked() {
		add(t)
	}
}

// matchedTopicsLocked returns the topics the group's patterns match,
// touching the group-level records when a pattern resolved to other topics.
func (g *group) matchedTopicsLocked() map[string]struct{} {
	matched, changed := g.cg.subs.matchedTopics(g.topicsLocked(), g.c.now())
	if changed {
		g.touchGroupLocked()
	}
	return matched
}
