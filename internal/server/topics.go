package server

import (
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/share"
)

// topicCatalog is the group coordinator's view of the topics (group.TopicCatalog),
// read from the latest metadata image the node applied.
type topicCatalog struct {
	image func() *metadata.Image
}

func (c topicCatalog) Topic(name string) ([16]byte, int32, bool) {
	t := c.image().Topic(name)
	if t == nil {
		return [16]byte{}, 0, false
	}
	return [16]byte(t.ID), int32(len(t.Partitions)), true
}

func (c topicCatalog) TopicName(id [16]byte) (string, bool) {
	t := c.image().TopicByID(metadata.UUID(id))
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// TopicNamesVersion is the image's offset: every metadata change moves it.
func (c topicCatalog) TopicNamesVersion() uint64 { return c.image().Offset() }

// TopicNames leaves out the internal topics, as Kafka does for pattern
// subscriptions.
func (c topicCatalog) TopicNames() []string {
	var out []string
	for _, t := range c.image().Topics() {
		if t.Name != group.OffsetsTopic && t.Name != share.StateTopic {
			out = append(out, t.Name)
		}
	}
	return out
}
