package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/interop/report"
)

// groupResult is what one kcat group member read and was assigned.
type groupResult struct {
	consumed    []report.Consumed
	assignments [][]int32
}

// consumeGroup runs `kcat -G` until the member is caught up (see member.behind), then
// stops it with SIGTERM and returns what it printed.
func consumeGroup(ctx context.Context, o options) (*groupResult, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// No -o: an offset given there would override the committed ones on every assignment.
	cmd := exec.Command("kcat", "-G", o.group, "-b", o.bootstrap, "-J", "-u",
		"-X", "client.id=strata-interop-"+o.name+"-group",
		"-X", "auto.offset.reset=earliest",
		"-X", "auto.commit.interval.ms=100",
		o.topic)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kcat group consumer: %w", err)
	}
	m := newMember(o.topic)
	var log strings.Builder // kcat's stderr, for error messages; read after exit
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			m.observe(sc.Text())
			log.WriteString(sc.Text() + "\n")
		}
		exited <- cmd.Wait() // only once stderr is drained
	}()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	why := "just started"
	for why != "" {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("kcat group consumer exited (%v) while %s: %s", err, why, tail(log.String()))
		case <-ctx.Done():
			cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("kcat group consumer: %w while %s: %s", ctx.Err(), why, tail(log.String()))
		case <-tick.C:
		}
		why = caughtUp(ctx, adm, o, m)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			return nil, fmt.Errorf("kcat group consumer after SIGTERM: %w: %s", err, tail(log.String()))
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return nil, fmt.Errorf("kcat group consumer ignored SIGTERM for 30s: %s", tail(log.String()))
	}
	consumed, err := parseRecords(&stdout)
	if err != nil {
		return nil, err
	}
	return &groupResult{consumed: consumed, assignments: m.history()}, nil
}

// caughtUp asks the brokers for the topic's end offsets and the group's committed
// offsets and returns why the member is not done yet, or "".
func caughtUp(ctx context.Context, adm *kadm.Client, o options, m *member) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, o.topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Sprintf("listing end offsets: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, o.group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return fmt.Sprintf("fetching committed offsets: %v", err)
	}
	end := map[int32]int64{}
	listed.Each(func(l kadm.ListedOffset) { end[l.Partition] = l.Offset })
	committed := map[int32]int64{}
	fetched.Each(func(r kadm.OffsetResponse) {
		if r.Topic == o.topic {
			committed[r.Partition] = r.At
		}
	})
	return m.behind(end, committed, int64(o.count))
}

// member follows one kcat group consumer through the lines it writes to stderr (at the
// default verbosity): "% Group G rebalanced (memberid M): assigned: T [0], T [2]", the
// same with "revoked:", the incremental forms of the cooperative protocol, and
// "% Reached end of topic T [P] at offset O". Safe for concurrent use.
type member struct {
	topic string
	mu    struct {
		sync.Mutex
		joined      bool
		owned       map[int32]bool
		eof         map[int32]int64 // partition -> offset at which it last reached the end
		assignments [][]int32
	}
}

func newMember(topic string) *member {
	m := &member{topic: topic}
	m.mu.owned = map[int32]bool{}
	m.mu.eof = map[int32]int64{}
	return m
}

var (
	eagerRE       = regexp.MustCompile(`rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$`)
	incrementalRE = regexp.MustCompile(`rebalanced: incremental (assignment|revoke) of .*: (.*)$`)
	eofRE         = regexp.MustCompile(`Reached end of topic (\S+) \[(\d+)\] at offset (\d+)`)
	partitionRE   = regexp.MustCompile(`(\S+) \[(\d+)\]`)
)

// observe takes one line of kcat's stderr.
func (m *member) observe(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := eofRE.FindStringSubmatch(line); g != nil {
		if g[1] == m.topic {
			p, _ := strconv.ParseInt(g[2], 10, 32)
			off, _ := strconv.ParseInt(g[3], 10, 64)
			m.mu.eof[int32(p)] = off
		}
		return
	}
	var kind, list string
	if g := eagerRE.FindStringSubmatch(line); g != nil {
		kind, list = g[1], g[2]
		if kind == "assigned" || kind == "revoked" {
			clear(m.mu.owned) // eager: the whole assignment changes
		}
	} else if g := incrementalRE.FindStringSubmatch(line); g != nil {
		kind, list = g[1], g[2]
	} else {
		return
	}
	adding := kind == "assigned" || kind == "assignment"
	for _, g := range partitionRE.FindAllStringSubmatch(list, -1) {
		if g[1] != m.topic {
			continue
		}
		p64, _ := strconv.ParseInt(g[2], 10, 32)
		p := int32(p64)
		if adding {
			m.mu.owned[p] = true
			delete(m.mu.eof, p) // the end must be reached again from the new position
		} else {
			delete(m.mu.owned, p)
		}
	}
	if adding {
		m.mu.joined = true
		m.mu.assignments = append(m.mu.assignments, slices.Sorted(maps.Keys(m.mu.owned)))
	}
}

// behind says why the member is not done, or returns "": it must have been assigned
// partitions at least once, the topic must hold at least minRecords records (offsets
// from 0), it must have reached the end offset of every partition it owns, and the group
// must have committed the end offset of every partition.
func (m *member) behind(end, committed map[int32]int64, minRecords int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.joined {
		return "waiting for a first assignment"
	}
	var total int64
	for _, e := range end {
		total += e
	}
	if len(end) == 0 || total < minRecords {
		return fmt.Sprintf("the topic holds %d of %d records", total, minRecords)
	}
	for _, p := range slices.Sorted(maps.Keys(m.mu.owned)) {
		if at, ok := m.mu.eof[p]; !ok || at < end[p] {
			return fmt.Sprintf("partition %d not read to its end %d yet", p, end[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(end)) {
		if c, ok := committed[p]; !ok || c < end[p] {
			return fmt.Sprintf("the group has not committed partition %d's end %d", p, end[p])
		}
	}
	return ""
}

// history returns the member's assignment after each rebalance that gave it partitions.
func (m *member) history() [][]int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.assignments)
}
