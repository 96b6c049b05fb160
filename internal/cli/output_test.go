package cli

import (
	"bytes"
	"testing"
)

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	tw := NewTable(&buf, "TOPIC", "PARTITIONS")
	tw.Row("orders", 3)
	tw.Row("a-much-longer-name", 12)
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	const want = "TOPIC               PARTITIONS\n" +
		"orders              3\n" +
		"a-much-longer-name  12\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestJoinInt32s(t *testing.T) {
	if got := JoinInt32s([]int32{1, 2, 3}); got != "1,2,3" {
		t.Error(got)
	}
	if got := JoinInt32s(nil); got != "-" {
		t.Error(got)
	}
}
