package main

// Cleaning up after a workload. Produce, e2e and the extra rows write a fresh
// topic per run and the consume rows one per workload; kept to the end of a
// run, the pre-encoded 100 B rows alone filled a disk with 38 GB free
// (docs/benchmarks.md, session 14). So every run, and every workload as a
// whole, is a scope on each system it touches:
//
//  1. openScope lists the system's topics and groups (internal, "__" topics
//     left out: the brokers make those once and keep them).
//  2. The run or workload goes on as before.
//  3. close lists them again, deletes what is new (DeleteTopics, then
//     DeleteGroups, a group that still has a member retried until
//     scopeDeleteBound), and waits until the system's directory holds no
//     partition directory of a deleted topic and none being deleted, so that
//     no timed run pays for an earlier run's deletion: Strata frees a deleted
//     replica in the background at most 64 MiB a second (internal/replica,
//     delete.go); Kafka after log.segment.delete.delay.ms, 1 s here
//     (kafkaProperties). A scope opened withSizes logs the systems' directory
//     sizes before the run or workload, after it and after the cleanup.
//
// A scope that cannot list or delete logs why and lets the run go on: its
// figures stand, only the disk may hold more.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// scopeDeleteBound bounds listing and deleting what a scope made.
	scopeDeleteBound = time.Minute
	// scopeFreeBound bounds the wait until the deleted topics' files are
	// freed: 30 GB at Strata's 64 MiB/s.
	scopeFreeBound = 8 * time.Minute
)

// holdings are the topics and groups a system has, sorted.
type holdings struct{ topics, groups []string }

// madeSince is what after holds that before does not, without internal
// ("__") topics.
func madeSince(before, after holdings) holdings {
	fresh := func(was, is []string) []string {
		var out []string
		for _, n := range is {
			if !strings.HasPrefix(n, "__") && !slices.Contains(was, n) {
				out = append(out, n)
			}
		}
		return out
	}
	return holdings{topics: fresh(before.topics, after.topics), groups: fresh(before.groups, after.groups)}
}

// admin is a client of the system's brokers, for listing and deleting.
func (s *system) admin() (*kadm.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.seeds...), kgo.ClientID("strata-vs-kafka-cleanup")}, s.clientOpts...)...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// holdings lists the system's topics and groups.
func (s *system) holdings(ctx context.Context, adm *kadm.Client) (holdings, error) {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return holdings{}, fmt.Errorf("listing topics: %w", err)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return holdings{}, fmt.Errorf("listing groups: %w", err)
	}
	return holdings{topics: topics.Names(), groups: groups.Groups()}, nil
}

// remove deletes the topics and groups of h.
func (s *system) remove(ctx context.Context, adm *kadm.Client, h holdings) error {
	if len(h.topics) > 0 {
		resps, err := adm.DeleteTopics(ctx, h.topics...)
		if err != nil {
			return fmt.Errorf("deleting topics: %w", err)
		}
		if err := resps.Error(); err != nil {
			return fmt.Errorf("deleting topics: %w", err)
		}
	}
	left := h.groups
	for len(left) > 0 {
		resps, err := adm.DeleteGroups(ctx, left...)
		if err != nil {
			return fmt.Errorf("deleting groups: %w", err)
		}
		left = nil // a new slice: the first round's is h.groups, which the caller reports
		for _, r := range resps.Sorted() {
			switch {
			case r.Err == nil, errors.Is(r.Err, kerr.GroupIDNotFound):
			case errors.Is(r.Err, kerr.NonEmptyGroup) || errors.Is(r.Err, kerr.CoordinatorLoadInProgress):
				left = append(left, r.Group) // a member's leave is still on its way
			default:
				return fmt.Errorf("deleting group %s: %w", r.Group, r.Err)
			}
		}
		if len(left) > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("deleting groups %v: %w", left, ctx.Err())
			case <-time.After(100 * time.Millisecond): // polling the coordinator's state
			}
		}
	}
	return nil
}

// scope is what one run or workload made on the systems it ran against.
type scope struct {
	label   string
	systems []*system
	before  map[*system]holdings // a system missing could not be listed
	sizes   map[*system]int64    // directory sizes at the start; nil: not logged
}

// openScope lists what each system holds before label runs; withSizes also
// takes each system's directory size, logged at close with the sizes before
// and after the cleanup.
func openScope(ctx context.Context, label string, withSizes bool, systems ...*system) *scope {
	sc := &scope{label: label, systems: systems, before: map[*system]holdings{}}
	if withSizes {
		sc.sizes = map[*system]int64{}
	}
	ctx, cancel := context.WithTimeout(ctx, scopeDeleteBound)
	defer cancel()
	for _, s := range systems {
		adm, err := s.admin()
		if err == nil {
			sc.before[s], err = s.holdings(ctx, adm)
			adm.Close()
		}
		if err != nil {
			delete(sc.before, s)
			logf("%s: %s: no cleanup after it: %v", label, s.name, err)
		}
		if sc.sizes != nil {
			sc.sizes[s] = dirBytes(s.dir)
		}
	}
	return sc
}

// close deletes on each system what is new since openScope and waits until
// the files are freed; it returns what it deleted (or tried to), by system.
func (sc *scope) close(ctx context.Context) map[*system]holdings {
	made, ended := map[*system]holdings{}, map[*system]int64{}
	for _, s := range sc.systems {
		if sc.sizes != nil {
			ended[s] = dirBytes(s.dir)
		}
	}
	for _, s := range sc.systems {
		before, ok := sc.before[s]
		if !ok {
			continue
		}
		h, err := s.removeMadeSince(ctx, before)
		made[s] = h
		if err != nil {
			logf("%s: %s: cleanup FAILED: %v", sc.label, s.name, err)
		}
	}
	for _, s := range sc.systems {
		h := made[s]
		switch {
		case sc.sizes != nil:
			logf("%s: %s directory %s before, %s after, %s after the cleanup (%d topics, %d groups deleted)", sc.label, s.name,
				mib(sc.sizes[s]), mib(ended[s]), mib(dirBytes(s.dir)), len(h.topics), len(h.groups))
		case len(h.topics) > 0 || len(h.groups) > 0:
			logf("%s: %s: deleted topics %v, groups %v", sc.label, s.name, h.topics, h.groups)
		}
	}
	return made
}

// removeMadeSince deletes what the system holds beyond before and waits until
// the deleted topics' files are freed.
func (s *system) removeMadeSince(ctx context.Context, before holdings) (holdings, error) {
	adm, err := s.admin()
	if err != nil {
		return holdings{}, err
	}
	defer adm.Close()
	dctx, cancel := context.WithTimeout(ctx, scopeDeleteBound)
	defer cancel()
	after, err := s.holdings(dctx, adm)
	if err != nil {
		return holdings{}, err
	}
	made := madeSince(before, after)
	if len(made.topics) == 0 && len(made.groups) == 0 {
		return made, nil
	}
	if err := s.remove(dctx, adm, made); err != nil {
		return made, err
	}
	return made, waitFreed(ctx, s.dir, made.topics, scopeFreeBound)
}

// waitFreed polls dir until unfreed finds nothing there for topics, at most bound.
func waitFreed(ctx context.Context, dir string, topics []string, bound time.Duration) error {
	if dir == "" {
		return nil
	}
	deadline := time.Now().Add(bound)
	for {
		left := unfreed(dir, topics)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("after %s, still in %s: %s", bound, dir, strings.Join(left, ", "))
		}
		time.Sleep(200 * time.Millisecond) // polling other processes' background work
	}
}

// unfreed lists the directories under dir that are a partition of one of
// topics (<topic>-<partition>) or a partition being deleted (both systems end
// that name in "delete": Strata's <topic>-<p>.<id>.delete, Kafka's
// <topic>-<p>.<id>-delete).
func unfreed(dir string, topics []string) []string {
	var left []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == dir {
			return nil // gone while walking: freed
		}
		name := d.Name()
		if strings.HasSuffix(name, "delete") || slices.ContainsFunc(topics, func(t string) bool { return isPartitionDir(name, t) }) {
			left = append(left, name)
			return fs.SkipDir
		}
		return nil
	})
	return left
}

// isPartitionDir says whether name is the directory of a partition of topic.
func isPartitionDir(name, topic string) bool {
	rest, ok := strings.CutPrefix(name, topic+"-")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// dirBytes is the disk space the files under dir take (allocated blocks, so
// sparse preallocated index files count as what they use), 0 on any error.
func dirBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
