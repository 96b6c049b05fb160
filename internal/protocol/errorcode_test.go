package protocol

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSetErrorCodeCoversKmsg: every kmsg response kind with a top-level
// ErrorCode gets the code from setErrorCode, so a request refused during a SASL
// exchange (illegalSASLState) carries ILLEGAL_SASL_STATE whatever its key,
// also after a kmsg upgrade adds keys.
func TestSetErrorCodeCoversKmsg(t *testing.T) {
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		resp := req.ResponseKind()
		setErrorCode(resp, 34)
		f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
		if f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 34 {
			t.Errorf("%s: ErrorCode %d after setErrorCode, want 34", kmsg.NameForKey(key), f.Int())
		}
	}
}
