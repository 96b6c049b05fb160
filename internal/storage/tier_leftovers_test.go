package storage

import (
	"context"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
	"github.com/strata-stream/strata/internal/vfs"
)

// fakeClock is a tier clock a test moves by hand.
type fakeClock struct{ now atomic.Pointer[time.Time] }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.now.Store(&t)
	return c
}

func (c *fakeClock) Now() time.Time          { return *c.now.Load() }
func (c *fakeClock) Advance(d time.Duration) { t := c.Now().Add(d); c.now.Store(&t) }

// tempNames returns the names holding ".tmp-" in the file store's directory
// of the tier's prefix.
func tempNames(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List("/objects/" + tierPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.Contains(n, ".tmp-") {
			out = append(out, n)
		}
	}
	return out
}

// leaveTemp writes a temporary object file under the tier's prefix, as a
// broker that crashed in the middle of a file:// Put leaves it.
func leaveTemp(t *testing.T, fsys vfs.FS, name string) {
	t.Helper()
	f, err := fsys.Create(path.Join("/objects", tierPrefix, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTierRemovesCrashedUploadTemps: a broker that crashes in the middle of a
// file:// Put leaves the object's temporary file behind. List does not show
// it, so neither the orphan sweep nor a topic's deletion used to remove it:
// the store leaked its bytes for ever. The first sweep after the restart keeps
// it while an upload could still be writing it, a later one removes it once
// it is older than that; DeleteAll (a deleted topic) removes every one.
func TestTierRemovesCrashedUploadTemps(t *testing.T) {
	fsys := vfs.NewMem()
	store := memStore(t, fsys)
	l, tier := tieredLog(t, store, 4096, nil)
	appendN(t, l, 40, 3, 100, 1000, 0)
	uploadAndRetain(t, l, tier)
	leaveTemp(t, fsys, "00000000000000009000-00000000000000009100.seg.tmp-1")

	// The restarted broker's tier.
	clock := newFakeClock(time.Now())
	cfg := tier.cfg
	cfg.Now = clock.Now
	restarted := NewTier(l, cfg)
	if err := restarted.Load(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	pass := func() {
		t.Helper()
		if _, _, err := restarted.EnforceRetention(ctxTimeout(t), l.LogEndOffset(), 0); err != nil {
			t.Fatal(err)
		}
	}
	pass() // the sweep after Load: the file may be an upload in progress
	if got := tempNames(t, fsys); len(got) != 1 {
		t.Fatalf("the first sweep left %v, want the young temporary file kept", got)
	}
	clock.Advance(24 * time.Hour)
	pass()
	if got := tempNames(t, fsys); len(got) != 0 {
		t.Fatalf("a day after the crash the store still holds %v", got)
	}

	leaveTemp(t, fsys, "00000000000000009000-00000000000000009100.seg.tmp-2")
	if err := restarted.DeleteAll(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	if names, err := fsys.List("/objects/" + tierPrefix); err != nil || len(names) != 0 {
		t.Fatalf("after DeleteAll the partition's directory holds %v, %v", names, err)
	}
}

// TestTierAbortsCrashedS3Uploads: the S3 form of the same leak. A broker that
// crashes during a multipart upload leaves the upload incomplete: S3 keeps
// (and bills) its parts until it is aborted, and ListObjects does not show
// it. The sweep after the restart aborts one older than an upload can take;
// DeleteAll aborts every one under the prefix.
func TestTierAbortsCrashedS3Uploads(t *testing.T) {
	rawURL := remotetest.StartS3Server(t).NewBucket(t)
	store, err := remote.Open(rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	core, err := minio.NewCore(u.Query().Get("endpoint"), &minio.Options{
		Creds: credentials.NewStaticV4("test", "test", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	bucket, objects := u.Host, strings.TrimPrefix(u.Path, "/")+"/"+tierPrefix+"/"
	// crashedUpload starts a multipart upload of one part and never
	// completes it.
	crashedUpload := func(ctx context.Context) {
		t.Helper()
		key := objects + "00000000000000009000-00000000000000009100.seg"
		id, err := core.NewMultipartUpload(ctx, bucket, key, minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		part := strings.NewReader(strings.Repeat("x", 1000))
		if _, err := core.PutObjectPart(ctx, bucket, key, id, 1, part, part.Size(), minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	incomplete := func(ctx context.Context) int {
		t.Helper()
		n := 0
		for up := range core.ListIncompleteUploads(ctx, bucket, objects, true) {
			if up.Err != nil {
				t.Fatal(up.Err)
			}
			n++
		}
		return n
	}

	l, tier := tieredLog(t, store, 4096, nil)
	appendN(t, l, 40, 3, 100, 1000, 0)
	uploadAndRetain(t, l, tier)
	ctx := ctxTimeout(t)
	crashedUpload(ctx)

	clock := newFakeClock(time.Now())
	cfg := tier.cfg
	cfg.Now = clock.Now
	restarted := NewTier(l, cfg)
	if err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	// (moto dates every upload 2010-11-10, so that a young one is kept is
	// TestTierRemovesCrashedUploadTemps's to show, on the file store.)
	clock.Advance(24 * time.Hour)
	if _, _, err := restarted.EnforceRetention(ctx, l.LogEndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if n := incomplete(ctx); n != 0 {
		t.Fatalf("a day after the crash %d incomplete uploads are left", n)
	}

	crashedUpload(ctx)
	if err := restarted.DeleteAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := incomplete(ctx); n != 0 {
		t.Fatalf("after DeleteAll %d incomplete uploads are left", n)
	}
}
