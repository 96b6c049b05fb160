// Package admin is the administration layer that Strata's non-Kafka front doors
// share: the strata CLI, the HTTP API and the web console. What a user means by
// "earliest", "latest", an offset or a time, and how that becomes one offset per
// partition, is written here once, over the Kafka protocol (a kadm client on any
// broker), so each front door resolves offsets the same way from any node.
//
// Resolving an offset spec, step by step:
//
//  1. ParseOffsetSpec reads the user's words (earliest, latest, N, an RFC3339 time,
//     @MS); front doors with their own input forms build an OffsetSpec directly.
//  2. ListBounds asks the partition leaders for each partition's log start offset
//     and high-water mark.
//  3. OffsetSpec.Resolve turns the spec into one offset per partition within those
//     bounds (a time after the last record is the high-water mark).
//
// Groups: DescribeGroups and GroupLag describe groups as every front door
// means them, DescribeGroups v6's GROUP_ID_NOT_FOUND (no classic group of
// that id) taken as v5's answer, a Dead group with no members (groups.go).
//
// Errors keep the Kafka error they wrap (errors.Is with kerr values works), and a
// partition no leader answered for wraps kerr.LeaderNotAvailable.
package admin
