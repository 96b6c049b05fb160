package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const orders = 100

// Scenario is one commit strategy.
type Scenario struct {
	Name string
	// commitBefore commits a record's offset before processing it.
	commitBefore bool
	// idempotent makes processing an insert that ignores order ids already seen.
	idempotent bool
}

// Report is what a scenario observed.
type Report struct {
	Scenario   string
	Produced   int
	Deliveries int // records handed to processing, over both consumers
	Duplicates int // deliveries of an order already delivered
	Lost       int // orders never processed
	Rows       int // rows in the "database" at the end
}

func (r Report) String() string {
	return fmt.Sprintf("%-20s produced=%d deliveries=%d duplicates=%d lost=%d rows=%d",
		r.Scenario, r.Produced, r.Deliveries, r.Duplicates, r.Lost, r.Rows)
}

var scenarios = []Scenario{
	{Name: "at-least-once"},
	{Name: "at-most-once", commitBefore: true},
	{Name: "idempotent-consumer", idempotent: true},
}

func runAll(ctx context.Context, brokers []string) ([]Report, error) {
	var out []Report
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, s := range scenarios {
		r, err := s.run(ctx, brokers, run)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// run produces the orders, lets consumer A crash after 65 deliveries (it commits
// every 10 records), then lets consumer B finish.
func (s Scenario) run(ctx context.Context, brokers []string, run string) (Report, error) {
	topic := "orders-" + s.Name + "-" + run
	group := "billing-" + s.Name + "-" + run
	rep := Report{Scenario: s.Name, Produced: orders}

	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return rep, err
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		return rep, err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return rep, err
	}
	defer prod.Close()
	for i := 0; i < orders; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("order-" + strconv.Itoa(i))}).FirstErr(); err != nil {
			return rep, err
		}
	}

	delivered := map[string]int{}
	rows := map[string]bool{}
	process := func(r *kgo.Record) {
		id := string(r.Key)
		rep.Deliveries++
		if delivered[id] > 0 {
			rep.Duplicates++
		}
		delivered[id]++
		if s.idempotent && rows[id] {
			return // INSERT ... ON CONFLICT DO NOTHING
		}
		rows[id] = true
	}
	// Consumer A crashes after 65 deliveries, mid-way between two commits; B runs
	// to the end.
	if err := s.consume(ctx, brokers, topic, group, 65, process); err != nil {
		return rep, err
	}
	if err := s.consume(ctx, brokers, topic, group, -1, process); err != nil {
		return rep, err
	}
	for i := 0; i < orders; i++ {
		if delivered[strconv.Itoa(i)] == 0 {
			rep.Lost++
		}
	}
	rep.Rows = len(rows)
	return rep, nil
}

// consume reads the group's partition from its committed offset. It commits every
// 10 records (before or after processing them, per the scenario) and stops after
// crashAfter deliveries without committing further (-1: read to the end, commit).
func (s Scenario) consume(ctx context.Context, brokers []string, topic, group string, crashAfter int, process func(*kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer cl.Close()
	const every = 10
	n := 0
	var pending []*kgo.Record
	commit := func(rs ...*kgo.Record) error { return cl.CommitRecords(ctx, rs...) }
	for {
		if crashAfter < 0 {
			end, err := endOffset(ctx, cl, topic)
			if err != nil {
				return err
			}
			if committed, _ := committedOffset(ctx, cl, group, topic); committed >= end {
				return nil
			}
		}
		fs := cl.PollRecords(ctx, every)
		if err := fs.Err0(); err != nil {
			return err
		}
		for _, r := range fs.Records() {
			if crashAfter >= 0 && n == crashAfter {
				return nil // crash: whatever is not committed is not remembered
			}
			if s.commitBefore {
				if (n+1)%every == 1 {
					// Commit the next ten records before processing any of them.
					last := *r
					last.Offset += every - 1
					if err := commit(&last); err != nil {
						return err
					}
				}
				process(r)
			} else {
				process(r)
				pending = append(pending, r)
				if len(pending) == every {
					if err := commit(pending[len(pending)-1]); err != nil {
						return err
					}
					pending = pending[:0]
				}
			}
			n++
		}
		if crashAfter < 0 && len(pending) > 0 {
			if err := commit(pending[len(pending)-1]); err != nil {
				return err
			}
			pending = pending[:0]
		}
	}
}

func endOffset(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, _ := offs.Lookup(topic, 0)
	return o.Offset, o.Err
}

func committedOffset(ctx context.Context, cl *kgo.Client, group, topic string) (int64, error) {
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return -1, nil
	}
	return o.At, o.Err
}
