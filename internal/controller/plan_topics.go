package controller

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/strata-stream/strata/internal/metadata"
)

// maxPartitionsPerRequest bounds the partitions one CreateTopics request
// creates, or one CreatePartitions request adds, over all its topics: beyond it
// every topic of the request is POLICY_VIOLATION, as in Kafka 4.4.
const maxPartitionsPerRequest = 10000

// maxDefaultReplicationFactor caps the replication factor chosen for requests
// that leave it to the cluster: min(3, live brokers).
const maxDefaultReplicationFactor = 3

// CreateTopic is one topic of a CreateTopics request.
type CreateTopic struct {
	Name string
	// NumPartitions is -1 for the cluster default.
	NumPartitions int32
	// ReplicationFactor is -1 for min(3, live brokers).
	ReplicationFactor int16
	// Assignment optionally lists the replicas of each partition, with the
	// partition indexes as the client sent them; then NumPartitions and
	// ReplicationFactor must be -1.
	Assignment []PartitionReplicas
	Configs    map[string]string
}

// PartitionReplicas is one entry of a manual assignment: a partition index
// and its replicas.
type PartitionReplicas struct {
	Partition int32
	Replicas  []int32
}

// CreateTopicResult is the outcome for one topic. Err is nil on success, else
// a metadata error carrying the Kafka code.
type CreateTopicResult struct {
	Name              string
	ID                metadata.UUID
	NumPartitions     int32
	ReplicationFactor int16
	Configs           []metadata.ConfigEntry // the topic's configs as created
	Err               error
}

// TopicRef names a topic by name, or by id when Name is empty.
type TopicRef struct {
	Name string
	ID   metadata.UUID
}

func (r TopicRef) String() string {
	if r.Name != "" {
		return strconv.Quote(r.Name)
	}
	return r.ID.String()
}

// DeleteTopicResult is the outcome for one topic of a DeleteTopics request.
type DeleteTopicResult struct {
	Name string
	ID   metadata.UUID
	Err  error
}

// CreatePartitions asks to grow a topic to Count partitions.
type CreatePartitions struct {
	Topic string
	Count int32
	// Assignment optionally lists the replicas of each new partition.
	Assignment [][]int32
}

// CreatePartitionsResult is the outcome for one topic.
type CreatePartitionsResult struct {
	Topic string
	Err   error
}

// PlanCreateTopics plans a CreateTopics request against img. Topics are
// checked in order, each against the image as the earlier ones leave it, so a
// request cannot create two colliding names. The records of every topic that
// passed are returned for one proposal; the results say which failed and why.
// Topic ids are read from rnd. Brokers in controlled shutdown (down) get no
// new replica, and lead nor join the ISR of none, as in Kafka. A topic may
// have remote.storage.enable=true only with remoteStorage (see
// metadata.CheckTopicConfigChange).
func PlanCreateTopics(img *metadata.Image, reqs []CreateTopic, defaultPartitions int32, rnd io.Reader, down ShuttingDown, remoteStorage bool) ([]metadata.Record, []CreateTopicResult) {
	dups := duplicates(len(reqs), func(i int) string { return reqs[i].Name })
	results := make([]CreateTopicResult, len(reqs))
	total := 0
	for _, req := range reqs {
		switch {
		case len(req.Assignment) > 0:
			total += len(req.Assignment)
		case req.NumPartitions == -1:
			total += int(defaultPartitions)
		case req.NumPartitions > 0:
			total += int(req.NumPartitions)
		}
	}
	var recs []metadata.Record
	for i, req := range reqs {
		res := &results[i]
		res.Name = req.Name
		if total > maxPartitionsPerRequest {
			res.Err = fmt.Errorf("%w: %d partitions in one request (at most %d)", metadata.ErrPolicyViolation, total, maxPartitionsPerRequest)
			continue
		}
		if dups[req.Name] {
			res.Err = fmt.Errorf("%w: topic %q appears more than once", metadata.ErrInvalidRequest, req.Name)
			continue
		}
		topicRecs, err := planCreateTopic(img, req, defaultPartitions, rnd, down, remoteStorage)
		if err == nil {
			img, err = metadata.ApplyAll(img, topicRecs)
		}
		if err != nil {
			res.Err = err
			continue
		}
		t := img.Topic(req.Name)
		res.ID = t.ID
		res.NumPartitions = int32(len(t.Partitions))
		res.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
		res.Configs, _ = img.TopicConfigEntries(req.Name, metadata.NoBroker)
		recs = append(recs, topicRecs...)
	}
	return recs, results
}

func planCreateTopic(img *metadata.Image, req CreateTopic, defaultPartitions int32, rnd io.Reader, down ShuttingDown, remoteStorage bool) ([]metadata.Record, error) {
	if req.Name == metadata.ClusterMetadataTopic { // refused before any other check, as Kafka's ControllerApis does
		return nil, metadata.KafkaText(metadata.ErrInvalidRequest, "Creation of internal topic %s is prohibited.", req.Name)
	}
	if err := metadata.ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if img.Topic(req.Name) != nil {
		return nil, metadata.KafkaText(metadata.ErrTopicExists, "Topic '%s' already exists.", req.Name)
	}
	if other, ok := img.CollidingTopic(req.Name); ok {
		return nil, fmt.Errorf("%w: %q collides with existing topic %q", metadata.ErrInvalidTopic, req.Name, other)
	}
	for _, k := range sortedKeys(req.Configs) {
		if err := metadata.ValidateConfigChange(metadata.ResourceTopic, k, req.Configs[k]); err != nil {
			return nil, err
		}
	}
	if err := metadata.CheckTopicConfigs(req.Configs, img.BrokerConfigs(""), remoteStorage); err != nil {
		return nil, err
	}
	var assignment [][]int32
	if len(req.Assignment) > 0 {
		if req.NumPartitions != -1 || req.ReplicationFactor != -1 {
			return nil, fmt.Errorf("%w: a manual assignment needs partitions and replication factor -1",
				metadata.ErrInvalidRequest)
		}
		var err error
		if assignment, err = manualAssignment(img, req.Assignment, down); err != nil {
			return nil, err
		}
	} else {
		// Kafka's order and words: the replication factor, then the count.
		if req.ReplicationFactor < -1 || req.ReplicationFactor == 0 {
			return nil, metadata.KafkaText(metadata.ErrInvalidReplicationFactor,
				"Replication factor must be larger than 0, or -1 to use the default value.")
		}
		if req.NumPartitions < -1 || req.NumPartitions == 0 {
			return nil, metadata.KafkaText(metadata.ErrInvalidPartitions,
				"Number of partitions was set to an invalid non-positive value.")
		}
		n := req.NumPartitions
		if n == -1 {
			n = defaultPartitions
		}
		if n < 1 || n > metadata.MaxPartitions {
			return nil, fmt.Errorf("%w: %d partitions (want 1 to %d)", metadata.ErrInvalidPartitions, n, metadata.MaxPartitions)
		}
		rf := int(req.ReplicationFactor)
		if rf == -1 {
			// Of the live brokers, so that a rolling restart does not
			// change a new topic's replication factor for good.
			rf = min(maxDefaultReplicationFactor, len(img.LiveBrokers()))
		}
		usable := usableBrokers(img, down)
		if err := checkReplicationFactor(rf, len(usable)); err != nil {
			return nil, err
		}
		assignment = placeReplicasOnRacks(img, usable, int(n), rf, img.NumPartitions())
	}
	id, err := newTopicID(img, rnd)
	if err != nil {
		return nil, err
	}
	recs := []metadata.Record{&metadata.TopicRecord{Name: req.Name, ID: id, Configs: req.Configs}}
	return append(recs, partitionRecords(img, id, 0, assignment, down)...), nil
}

// checkReplicationFactor refuses a replication factor below 1 or above the
// number of live brokers (with Kafka's message).
func checkReplicationFactor(rf, live int) error {
	switch {
	case rf < 1:
		return fmt.Errorf("%w: replication factor %d", metadata.ErrInvalidReplicationFactor, rf)
	case rf > live:
		return metadata.KafkaText(metadata.ErrInvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached "+
				"because only %d broker(s) are registered or some brokers have all their log directories cordoned.", rf, rf, live)
	}
	return nil
}

// manualAssignment checks a new topic's manual assignment as Kafka's
// controller does, with its messages, and returns the replicas of partitions
// 0 to n-1. Entries are checked in the order sent: no partition index twice,
// each passes checkPartition with as many replicas as the first entry; then
// the indexes must be 0 to n-1 (so a negative one is a gap too).
func manualAssignment(img *metadata.Image, entries []PartitionReplicas, down ShuttingDown) ([][]int32, error) {
	byIndex := make(map[int32][]int32, len(entries))
	rf := len(entries[0].Replicas)
	for _, e := range entries {
		if _, ok := byIndex[e.Partition]; ok {
			return nil, metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"Found multiple manual partition assignments for partition %d", e.Partition)
		}
		if err := checkPartition(img, e.Partition, e.Replicas, rf, down); err != nil {
			return nil, err
		}
		byIndex[e.Partition] = e.Replicas
	}
	assignment := make([][]int32, len(entries))
	for i := range assignment {
		replicas, ok := byIndex[int32(i)]
		if !ok {
			return nil, metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"partitions should be a consecutive 0-based integer sequence")
		}
		assignment[i] = replicas
	}
	return assignment, nil
}

// checkAssignment validates a manual assignment of the partitions numbered
// from first with checkPartition.
func checkAssignment(img *metadata.Image, assignment [][]int32, rf int, first int32, down ShuttingDown) error {
	for i, replicas := range assignment {
		if err := checkPartition(img, first+int32(i), replicas, rf, down); err != nil {
			return err
		}
	}
	return nil
}

// checkPartition validates the manual replicas of one partition as Kafka's
// controller does and with its messages: they pass checkReplicas, there are
// rf of them, and at least one is live and not in controlled shutdown (down).
func checkPartition(img *metadata.Image, partition int32, replicas []int32, rf int, down ShuttingDown) error {
	if err := checkReplicas(img, replicas); err != nil {
		return err
	}
	if len(replicas) != rf {
		return metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes a partition with %d replica(s), "+
				"but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
	}
	if !slices.ContainsFunc(replicas, eligible(img, down)) {
		return metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
			"All brokers specified in the manual partition assignment for partition %d "+
				"are fenced or in controlled shutdown.", partition)
	}
	return nil
}

// checkReplicas checks one partition's manual replica list as Kafka does, with
// its messages: not empty, every broker registered and named once, looked at
// in ascending id order (so the message names the lowest offender).
func checkReplicas(img *metadata.Image, replicas []int32) error {
	if len(replicas) == 0 {
		return metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
			"The manual partition assignment includes an empty replica list.")
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if img.Broker(id) == nil {
			return metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return nil
}

// partitionRecords creates partitions first, first+1, ... with the given
// replicas; the ISR is the live replicas not in controlled shutdown (down), as
// Kafka's (a broker shutting down joins once it is back and caught up), and
// the leader the first of them.
func partitionRecords(img *metadata.Image, id metadata.UUID, first int32, assignment [][]int32, down ShuttingDown) []metadata.Record {
	recs := make([]metadata.Record, 0, len(assignment))
	usable := eligible(img, down)
	for i, replicas := range assignment {
		isr := slices.DeleteFunc(slices.Clone(replicas), func(b int32) bool { return !usable(b) })
		leader := metadata.NoLeader
		if len(isr) > 0 {
			leader = isr[0]
		}
		recs = append(recs, &metadata.PartitionRecord{
			TopicID: id, Partition: first + int32(i),
			Replicas: slices.Clone(replicas), ISR: isr, Leader: leader,
		})
	}
	return recs
}

// placeReplicas assigns rf replicas of n partitions to the brokers in live.
// Partition p's position in the cluster-wide sequence is start+p; its preferred
// leader walks round-robin over the brokers, so leaders spread evenly, and its
// followers are the brokers right after the leader, skipped ahead by one more
// every full round so that the same brokers are not always paired. Over any
// round of len(live) positions every broker holds exactly rf replicas.
func placeReplicas(live []int32, n, rf, start int) [][]int32 {
	b := len(live)
	out := make([][]int32, n)
	for p := range out {
		pos := start + p
		first := pos % b
		replicas := make([]int32, rf)
		replicas[0] = live[first]
		if b > 1 {
			shift := (pos / b) % (b - 1)
			for j := 1; j < rf; j++ {
				replicas[j] = live[(first+1+(shift+j-1)%(b-1))%b]
			}
		}
		out[p] = replicas
	}
	return out
}

// newTopicID draws ids from rnd until one is unused.
func newTopicID(img *metadata.Image, rnd io.Reader) (metadata.UUID, error) {
	for {
		id, err := metadata.NewUUID(rnd)
		if err != nil {
			return metadata.UUID{}, err
		}
		if img.TopicByID(id) == nil {
			return id, nil
		}
	}
}

// PlanDeleteTopics plans a DeleteTopics request against img. As in Kafka, a
// reference with both a name and an id, or with neither, and a name or id
// given more than once (existing or not, or one topic by name and by id) are
// INVALID_REQUEST.
func PlanDeleteTopics(img *metadata.Image, refs []TopicRef) ([]metadata.Record, []DeleteTopicResult) {
	results := make([]DeleteTopicResult, len(refs))
	seen := make(map[metadata.UUID]int, len(refs)) // topic id -> index of first result
	given := make(map[TopicRef]int, len(refs))
	for _, ref := range refs {
		given[ref]++
	}
	for i, ref := range refs {
		res := &results[i]
		res.Name, res.ID = ref.Name, ref.ID
		var t *metadata.Topic
		switch {
		case ref.Name != "" && !ref.ID.IsZero():
			res.Err = fmt.Errorf("%w: both a topic name and an id", metadata.ErrInvalidRequest)
		case given[ref] > 1:
			res.Err = fmt.Errorf("%w: topic %s appears more than once", metadata.ErrInvalidRequest, ref)
		case ref.Name != "":
			if t = img.Topic(ref.Name); t == nil {
				res.Err = fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, ref.Name)
			}
		case !ref.ID.IsZero():
			if t = img.TopicByID(ref.ID); t == nil {
				res.Err = fmt.Errorf("%w: %s", metadata.ErrUnknownTopicID, ref.ID)
			}
		default:
			res.Err = fmt.Errorf("%w: neither a topic name nor an id", metadata.ErrInvalidRequest)
		}
		if t == nil {
			continue
		}
		res.Name, res.ID = t.Name, t.ID
		if j, dup := seen[t.ID]; dup {
			err := fmt.Errorf("%w: topic %q appears more than once", metadata.ErrInvalidRequest, t.Name)
			res.Err, results[j].Err = err, err
			continue
		}
		seen[t.ID] = i
	}
	var recs []metadata.Record
	for _, res := range results {
		if res.Err == nil {
			recs = append(recs, &metadata.RemoveTopicRecord{TopicID: res.ID})
		}
	}
	return recs, results
}

// PlanCreatePartitions plans a CreatePartitions request against img. New
// partitions keep the topic's replication factor. Brokers in controlled
// shutdown (down) are left out as by PlanCreateTopics.
func PlanCreatePartitions(img *metadata.Image, reqs []CreatePartitions, down ShuttingDown) ([]metadata.Record, []CreatePartitionsResult) {
	dups := duplicates(len(reqs), func(i int) string { return reqs[i].Topic })
	results := make([]CreatePartitionsResult, len(reqs))
	added := 0
	for _, req := range reqs {
		if t := img.Topic(req.Topic); t != nil && int(req.Count) > len(t.Partitions) {
			added += int(req.Count) - len(t.Partitions)
		}
	}
	var recs []metadata.Record
	for i, req := range reqs {
		results[i].Topic = req.Topic
		if added > maxPartitionsPerRequest {
			results[i].Err = fmt.Errorf("%w: %d new partitions in one request (at most %d)", metadata.ErrPolicyViolation, added, maxPartitionsPerRequest)
			continue
		}
		if dups[req.Topic] {
			results[i].Err = fmt.Errorf("%w: topic %q appears more than once", metadata.ErrInvalidRequest, req.Topic)
			continue
		}
		topicRecs, err := planCreatePartitions(img, req, down)
		if err == nil {
			img, err = metadata.ApplyAll(img, topicRecs)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		recs = append(recs, topicRecs...)
	}
	return recs, results
}

func planCreatePartitions(img *metadata.Image, req CreatePartitions, down ShuttingDown) ([]metadata.Record, error) {
	t := img.Topic(req.Topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, req.Topic)
	}
	have := int32(len(t.Partitions))
	switch {
	case req.Count == have:
		return nil, metadata.KafkaText(metadata.ErrInvalidPartitions, "Topic already has %d partition(s).", have)
	case req.Count < have:
		return nil, metadata.KafkaText(metadata.ErrInvalidPartitions,
			"The topic %s currently has %d partition(s); %d would not be an increase.", req.Topic, have, req.Count)
	case req.Count > metadata.MaxPartitions:
		return nil, fmt.Errorf("%w: %d partitions (limit %d)", metadata.ErrInvalidPartitions, req.Count, metadata.MaxPartitions)
	}
	rf := len(t.Partitions[0].Replicas)
	var assignment [][]int32
	if len(req.Assignment) > 0 {
		if len(req.Assignment) != int(req.Count-have) {
			return nil, metadata.KafkaText(metadata.ErrInvalidReplicaAssignment,
				"Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
				req.Count-have, len(req.Assignment))
		}
		if err := checkAssignment(img, req.Assignment, rf, have, down); err != nil {
			return nil, err
		}
		assignment = req.Assignment
	} else {
		usable := usableBrokers(img, down)
		if err := checkReplicationFactor(rf, len(usable)); err != nil {
			return nil, err
		}
		assignment = placeReplicasOnRacks(img, usable, int(req.Count-have), rf, img.NumPartitions())
	}
	return partitionRecords(img, t.ID, have, assignment, down), nil
}

// usableBrokers is the live brokers not in controlled shutdown: those new
// replicas are placed on, as Kafka's replica placer takes them.
func usableBrokers(img *metadata.Image, down ShuttingDown) []int32 {
	return slices.DeleteFunc(img.LiveBrokers(), func(id int32) bool { return inControlledShutdown(img, down, id) })
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// duplicates returns the keys that occur more than once among n items.
func duplicates(n int, key func(int) string) map[string]bool {
	seen := make(map[string]bool, n)
	var dups map[string]bool
	for i := range n {
		k := key(i)
		if seen[k] {
			if dups == nil {
				dups = make(map[string]bool)
			}
			dups[k] = true
		}
		seen[k] = true
	}
	return dups
}
