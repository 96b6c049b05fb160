package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/sasl"
)

// ScramUpsertion sets a user's credential for one mechanism from a salted
// password (AlterUserScramCredentials carries the salted password, never the
// password itself).
type ScramUpsertion struct {
	User           string
	Mechanism      metadata.ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion removes a user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism metadata.ScramMechanism
}

// ScramResult is the outcome for one user: all of the user's changes apply, or
// none do.
type ScramResult struct {
	User string
	Err  error
}

// Errors of PlanAlterScramCredentials, with Kafka's codes.
var (
	// ErrDuplicateResource: a user named twice in one request (any mechanisms,
	// deletions and upsertions alike, as Kafka's controller refuses them).
	ErrDuplicateResource = &metadata.KafkaError{Code: kerr.DuplicateResource.Code, Msg: "duplicate resource"}
	// ErrUnacceptableCredential: an empty user, an iteration count out of range or
	// an empty salt or salted password.
	ErrUnacceptableCredential = &metadata.KafkaError{Code: kerr.UnacceptableCredential.Code, Msg: "unacceptable credential"}
)

// PlanAlterScramCredentials plans the records for deletions and upsertions and
// returns one result per user, in order of first appearance. Deletions are
// taken first, then upsertions, as Kafka does: a user's first change is
// checked; a later change of a user whose first was accepted fails the user
// with ErrDuplicateResource, one of a user already failed is not looked at.
func PlanAlterScramCredentials(img *metadata.Image, dels []ScramDeletion, ups []ScramUpsertion) ([]metadata.Record, []ScramResult) {
	var users []string
	userErr := map[string]error{}
	recsOf := map[string][]metadata.Record{}
	// note reports whether user's change is to be checked: its first mention.
	note := func(user string) bool {
		if _, ok := userErr[user]; !ok {
			users = append(users, user)
			userErr[user] = nil
			return true
		}
		if userErr[user] == nil {
			userErr[user] = fmt.Errorf("%w: user %q altered twice in one request", ErrDuplicateResource, user)
		}
		return false
	}
	fail := func(user string, err error) {
		if userErr[user] == nil {
			userErr[user] = err
		}
	}
	for _, d := range dels {
		if !note(d.User) {
			continue
		}
		if err := checkScramUserMech(d.User, d.Mechanism); err != nil {
			fail(d.User, err)
			continue
		}
		if _, ok := img.ScramCredential(d.User, d.Mechanism); !ok {
			fail(d.User, fmt.Errorf("%w: no %s credential for user %q", metadata.ErrResourceNotFound, d.Mechanism, d.User))
			continue
		}
		recsOf[d.User] = append(recsOf[d.User], &metadata.ScramCredentialRecord{
			ScramCredential: metadata.ScramCredential{User: d.User, Mechanism: d.Mechanism}, Delete: true})
	}
	for _, u := range ups {
		if !note(u.User) {
			continue
		}
		if err := checkScramUserMech(u.User, u.Mechanism); err != nil {
			fail(u.User, err)
			continue
		}
		cred, err := sasl.CredentialFromSalted(sasl.Mechanism(u.Mechanism.String()), u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			fail(u.User, fmt.Errorf("%w: %v", ErrUnacceptableCredential, err))
			continue
		}
		recsOf[u.User] = append(recsOf[u.User], scramRecord(u.User, u.Mechanism, cred))
	}
	var recs []metadata.Record
	results := make([]ScramResult, len(users))
	for i, user := range users {
		results[i] = ScramResult{User: user, Err: userErr[user]}
		if userErr[user] == nil {
			recs = append(recs, recsOf[user]...)
		}
	}
	return recs, results
}

func checkScramUserMech(user string, mech metadata.ScramMechanism) error {
	if user == "" {
		return fmt.Errorf("%w: empty user name", ErrUnacceptableCredential)
	}
	if mech != metadata.ScramSHA256 && mech != metadata.ScramSHA512 {
		return fmt.Errorf("%w: mechanism %d", metadata.ErrUnsupportedSaslMechanism, int8(mech))
	}
	return nil
}

// scramRecord is the record that sets cred as user's credential for mech.
func scramRecord(user string, mech metadata.ScramMechanism, cred sasl.Credential) *metadata.ScramCredentialRecord {
	return &metadata.ScramCredentialRecord{ScramCredential: metadata.ScramCredential{
		User: user, Mechanism: mech, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations,
	}}
}
