package admin

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAddVoterWhenCaughtUp: a "lagging behind" refusal is asked again, and
// reported, until another answer comes or the context ends (then the last
// refusal is the answer); any other answer, REQUEST_TIMED_OUT for an unknown
// node included, is returned at once.
func TestAddVoterWhenCaughtUp(t *testing.T) {
	answer := func(code int16, msg string) *kmsg.AddRaftVoterResponse {
		r := kmsg.NewPtrAddRaftVoterResponse()
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	}
	lagging := answer(kerr.RequestTimedOut.Code, "lagging behind: node 4 is in controlled shutdown")
	unknown := answer(kerr.RequestTimedOut.Code, "not caught up: node 9 is not a member of the quorum")
	ok := kmsg.NewPtrAddRaftVoterResponse()
	for _, tt := range []struct {
		name    string
		answers []*kmsg.AddRaftVoterResponse // the last one repeats
		cancel  int                          // cancel the context after this many requests; 0: never
		want    *kmsg.AddRaftVoterResponse
		tries   int
		told    int // refusals reported
	}{
		{name: "caught up at once", answers: []*kmsg.AddRaftVoterResponse{ok}, want: ok, tries: 1},
		{name: "caught up on the third try", answers: []*kmsg.AddRaftVoterResponse{lagging, lagging, ok}, want: ok, tries: 3, told: 2},
		{name: "an unknown node is not asked again", answers: []*kmsg.AddRaftVoterResponse{unknown}, want: unknown, tries: 1},
		{name: "lagging until the timeout", answers: []*kmsg.AddRaftVoterResponse{lagging}, cancel: 2, want: lagging, tries: 2, told: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tries, told := 0, 0
			got, err := AddVoterWhenCaughtUp(ctx, time.Millisecond, func(context.Context) (*kmsg.AddRaftVoterResponse, error) {
				r := tt.answers[min(tries, len(tt.answers)-1)]
				if tries++; tries == tt.cancel {
					cancel()
				}
				return r, nil
			}, func(string) { told++ })
			if err != nil || got != tt.want || tries != tt.tries || told != tt.told {
				t.Fatalf("answer %+v (%v) after %d requests, %d reported; want %+v after %d, %d reported", got, err, tries, told, tt.want, tt.tries, tt.told)
			}
		})
	}
}
