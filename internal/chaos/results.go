package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/strata-stream/strata/internal/chaos/history"
)

// The columns of the results table beyond lost, duplicated, reordered and
// phantom: every other anomaly class is counted under "other".
var (
	lostClasses      = []string{history.LostWrite, history.Unseen, history.ShareLost}
	reorderedClasses = []string{history.NonmonotonicSend, history.KeyOrder}
	otherClasses     = []string{history.InconsistentOffsets, history.PollSkip, history.NonmonotonicPoll,
		history.FailedWriteRead, history.Unprocessed, ReplicaDivergence,
		history.AbortedRead, history.TornTxn, history.StuckLSO, history.TxnOffsetMismatch,
		history.ShareAcceptedTwice, history.ShareDeliveredAfterAck, history.ShareCountBack, history.ShareBadDeadLetter}
)

func sum(counts map[string]int, classes ...string) int {
	n := 0
	for _, c := range classes {
		n += counts[c]
	}
	return n
}

// faultList is "kill 3, pause 2, ..." in kind order.
func faultList(m map[Kind]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Table renders runs as a Markdown table with a totals row.
func Table(runs []RunResult) string {
	var b strings.Builder
	b.WriteString("| run | seed | nodes | faulting | faults injected | acked | unknown | lost | duplicated | reordered | phantom | other anomalies | recovery findings | group repeats | max unavailability |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var tot RunResult
	tot.Faults = map[Kind]int{}
	var lost, dup, reord, phantom, other int
	for _, r := range runs {
		c := r.Check.Counts
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
			r.Name, r.Seed, r.Nodes, r.FaultTime.Round(time.Second), faultList(r.Faults), r.Check.Acked, r.Check.Unknown,
			sum(c, lostClasses...), c[history.Duplicate], sum(c, reorderedClasses...), c[history.Phantom], sum(c, otherClasses...),
			len(r.Findings), r.Check.GroupDuplicates, r.MaxUnavailable.Round(100*time.Millisecond))
		tot.FaultTime += r.FaultTime
		for k, n := range r.Faults {
			tot.Faults[k] += n
		}
		tot.Check.Acked += r.Check.Acked
		tot.Check.Unknown += r.Check.Unknown
		tot.Check.GroupDuplicates += r.Check.GroupDuplicates
		tot.Findings = append(tot.Findings, r.Findings...)
		tot.MaxUnavailable = max(tot.MaxUnavailable, r.MaxUnavailable)
		lost += sum(c, lostClasses...)
		dup += c[history.Duplicate]
		reord += sum(c, reorderedClasses...)
		phantom += c[history.Phantom]
		other += sum(c, otherClasses...)
	}
	fmt.Fprintf(&b, "| **%d runs** | | | **%s** | %s | **%d** | %d | **%d** | **%d** | **%d** | **%d** | **%d** | %d | %d | %s (max) |\n",
		len(runs), tot.FaultTime.Round(time.Second), faultList(tot.Faults), tot.Check.Acked, tot.Check.Unknown,
		lost, dup, reord, phantom, other, len(tot.Findings), tot.Check.GroupDuplicates, tot.MaxUnavailable.Round(100*time.Millisecond))
	return b.String()
}

// Details lists each run's schedule as it was resolved, its findings and the
// first anomalies of each class.
func Details(runs []RunResult) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "%s (seed %d):\n", r.Name, r.Seed)
		for _, e := range r.Events {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		for _, e := range slices.Sorted(maps.Keys(r.SendErrors)) {
			fmt.Fprintf(&b, "  sends not acknowledged: %d with %q\n", r.SendErrors[e], e)
		}
		if s := r.Share; s != nil {
			fmt.Fprintf(&b, "  share group: %d records, %d deliveries (%d records more than once); %d accepted, %d accepted without an answer, %d dead-lettered (%d at the delivery count limit, %d extra copies); acknowledgements %d unanswered, %d refused\n",
				s.Records, s.Deliveries, s.Redelivered, s.Accepted, s.AcceptedUnanswered, s.DeadLetter, s.DeadLetterAtLimit, s.DeadLetterCopies, s.AcksUnknown, s.AcksFailed)
		}
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "  FINDING: %s\n", f)
		}
		if !r.Check.OK() {
			for _, line := range strings.Split(strings.TrimSpace(r.Check.Summary()), "\n") {
				fmt.Fprintf(&b, "  ANOMALY %s\n", line)
			}
		}
	}
	return b.String()
}

// The markers around the generated section of the report.
const (
	reportBegin = "<!-- chaos-results:begin -->"
	reportEnd   = "<!-- chaos-results:end -->"
)

// updateReport replaces what lies between the markers in the file at path.
func updateReport(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(reportBegin)), bytes.Index(b, []byte(reportEnd))
	if i < 0 || j < i {
		return errors.New(path + " has no " + reportBegin + " ... " + reportEnd + " section")
	}
	var out bytes.Buffer
	out.Write(b[:i+len(reportBegin)])
	out.WriteString("\n" + strings.TrimSpace(section) + "\n")
	out.Write(b[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
