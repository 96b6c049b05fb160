// Package cli is the plumbing shared by the strata client commands (topic, produce,
// consume, group, cluster): reaching the brokers, exit statuses, table and JSON output,
// progress reporting, and the small argument languages the commands share (offset
// specs, key=value pairs, record templates).
//
// It knows nothing about cobra: the commands in cmd/strata parse flags and call in
// here, so everything below is testable without a command line.
//
// Exit statuses scripts can rely on:
//
//	0  success
//	1  the operation failed (broker error, unknown topic, a record not delivered)
//	2  the command was called wrongly (bad flag, bad argument); see UsageError
//
// Concurrency: values are not safe for concurrent use unless their doc says so
// (Progress is, because producer acknowledgements arrive on the client's goroutines).
package cli
