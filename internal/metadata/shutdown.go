package metadata

// ControlledShutdownRecord (type 36, version 0) marks registration Epoch of
// broker BrokerID as in controlled shutdown (Kafka's
// BrokerRegistrationChangeRecord with InControlledShutdown set, KIP-841): it
// may neither lead nor join an ISR until it registers anew, and every
// broker's image says so, so that a leader neither waits for it nor proposes
// it back into an ISR it left. A new registration of the broker starts
// without the mark; fencing keeps it.
//
// Like BrokerFeaturesRecord it goes in a Raft entry of its own, before the
// hand-off that takes the broker out of the ISRs: a build that predates the
// type refuses that entry only, and its nodes miss only the mark.
type ControlledShutdownRecord struct {
	BrokerID int32
	Epoch    int64
}

func (*ControlledShutdownRecord) Type() RecordType { return TypeControlledShutdown }

func (r *ControlledShutdownRecord) appendBody(b []byte) []byte {
	return appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
}

func (r *ControlledShutdownRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
}

// controlledShutdown marks the broker's current registration.
func (b *builder) controlledShutdown(r *ControlledShutdownRecord) error {
	old, err := b.registration(r.BrokerID, r.Epoch)
	if err != nil {
		return err
	}
	c := *old
	c.InControlledShutdown = true
	b.mutBrokers()[r.BrokerID] = &c
	return nil
}

// InControlledShutdown reports whether broker id's registration is in
// controlled shutdown (ControlledShutdownRecord).
func (img *Image) InControlledShutdown(id int32) bool {
	b := img.brokers[id]
	return b != nil && b.InControlledShutdown
}
