package metadata

import (
	"fmt"
	"maps"
	"slices"
)

// BrokerDirectoryRecord (type 33, version 0) records the data directory id
// that registration Epoch of broker BrokerID was made with (the node's
// directory.id). A new registration of the broker starts without one; the
// controller compares a registration's directory with the recorded one to
// tell a restart from a replaced, empty data directory
// (controller.PlanRegisterBroker).
//
// Like BrokerFeaturesRecord it goes in a Raft entry of its own after the
// registration's: a build that predates the type refuses that entry only, so
// the older nodes of a rolling upgrade still apply every registration (a
// RegisterBrokerRecord of version 0) and miss only the directory ids, which
// they do not use.
type BrokerDirectoryRecord struct {
	BrokerID    int32
	Epoch       int64
	DirectoryID UUID
}

func (*BrokerDirectoryRecord) Type() RecordType { return TypeBrokerDirectory }

func (r *BrokerDirectoryRecord) appendBody(b []byte) []byte {
	b = appendInt64(appendInt32(b, r.BrokerID), r.Epoch)
	return append(b, r.DirectoryID[:]...)
}

func (r *BrokerDirectoryRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.Epoch = rd.int64()
	r.DirectoryID = rd.uuid()
}

// brokerDirectory sets the directory id of the broker's current registration.
func (b *builder) brokerDirectory(r *BrokerDirectoryRecord) error {
	old, err := b.registration(r.BrokerID, r.Epoch)
	switch {
	case err != nil:
		return err
	case r.DirectoryID.IsZero():
		return fmt.Errorf("%w: broker %d zero directory id", ErrInvalidRequest, r.BrokerID)
	}
	c := *old
	c.DirectoryID = r.DirectoryID
	b.mutBrokers()[r.BrokerID] = &c
	return nil
}

// FormerDirectoryRecord (type 35, version 0) is, in snapshots only, the data
// directory of the last registration of broker BrokerID, which is not
// registered: UnregisterBroker removed it. Applying an UnregisterBrokerRecord
// keeps the directory of the registration it removes, and a new registration
// of the id forgets it, so the log needs no record of its own.
//
// A broker that comes back after its unregistration is compared with it, as
// a re-registration is with the registration it replaces
// (controller.PlanRegisterBroker): the partitions it was the last in-sync
// replica of keep it in their ISR, and with a new, empty data directory it
// must not lead them. Kafka keeps the same knowledge in the partitions: each
// replica's directory id (KIP-858), which a broker registering without that
// directory does not have online.
type FormerDirectoryRecord struct {
	BrokerID    int32
	DirectoryID UUID
}

func (*FormerDirectoryRecord) Type() RecordType { return TypeFormerDirectory }

func (r *FormerDirectoryRecord) appendBody(b []byte) []byte {
	return append(appendInt32(b, r.BrokerID), r.DirectoryID[:]...)
}

func (r *FormerDirectoryRecord) readBody(rd *reader) {
	r.BrokerID = rd.int32()
	r.DirectoryID = rd.uuid()
}

func (b *builder) formerDirectory(r *FormerDirectoryRecord) error {
	switch {
	case b.img.brokers[r.BrokerID] != nil:
		return fmt.Errorf("%w: broker %d is registered", ErrInvalidRequest, r.BrokerID)
	case r.BrokerID < 0 || r.DirectoryID.IsZero():
		return fmt.Errorf("%w: broker %d former directory %v", ErrInvalidRequest, r.BrokerID, r.DirectoryID)
	}
	b.setFormerDirectory(r.BrokerID, r.DirectoryID)
	return nil
}

// setFormerDirectory records dir as unregistered broker id's directory; a
// zero dir forgets it.
func (b *builder) setFormerDirectory(id int32, dir UUID) {
	if _, ok := b.img.formerDirs[id]; !ok && dir.IsZero() {
		return
	}
	if !b.ownFormerDirs {
		b.img.formerDirs = maps.Clone(b.img.formerDirs)
		if b.img.formerDirs == nil {
			b.img.formerDirs = make(map[int32]UUID)
		}
		b.ownFormerDirs = true
	}
	if dir.IsZero() {
		delete(b.img.formerDirs, id)
	} else {
		b.img.formerDirs[id] = dir
	}
}

// FormerDirectory returns the data directory of broker id's last
// registration, removed by UnregisterBroker, or the zero UUID when the id is
// registered or that directory was not recorded.
func (img *Image) FormerDirectory(id int32) UUID { return img.formerDirs[id] }

func (img *Image) formerDirectoryRecords() []Record {
	var recs []Record
	for _, id := range slices.Sorted(maps.Keys(img.formerDirs)) {
		recs = append(recs, &FormerDirectoryRecord{BrokerID: id, DirectoryID: img.formerDirs[id]})
	}
	return recs
}
