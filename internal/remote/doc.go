// Package remote is the object-store door of tiered storage: a small Store
// interface (put, get a byte range, delete, list) that the storage package's tier
// uploads closed segments through and reads them back from, with one
// implementation per URL scheme.
//
// # Contract (every implementation; remotetest.Run checks it)
//
//  1. Put(ctx, key, r, size) stores exactly size bytes read from r under key,
//     replacing any object of that name. An object is visible to Get and List only
//     once Put returned nil, and then whole: a crash or error mid-Put leaves either
//     the old object or none, never a prefix.
//  2. Get(ctx, key, off, n) returns n bytes from off (fewer only when the object
//     ends first; n < 0 reads to the end). A missing key gives ErrNotFound; off
//     past the end gives ErrRange.
//  3. Delete(ctx, key) removes key; deleting a missing key is not an error.
//  4. List(ctx, prefix) returns every key starting with prefix, sorted.
//  5. Errors other than ErrNotFound and ErrRange (unreachable, timeout, I/O) wrap
//     ErrUnavailable: the caller retries later.
//
// Keys are slash-separated relative names ("topic-3/00000000000000000100.log"); a
// key holds no "..", no empty element and no leading slash (ErrInvalidKey).
//
// # Implementations
//
//   - file:///dir (NewFile): any mounted filesystem, through vfs. Put writes
//     key.tmp-N, fsyncs it, renames it over key and fsyncs the directory;
//     PutUnsynced (NameSyncer) leaves both fsyncs to a SyncNames that covers
//     a batch of objects with one syncfs(2) where the vfs has it.
//     LinkUnsynced (FileLinker) makes a whole local file on the same
//     filesystem an object with a hard link,
//     copying nothing; the caller keeps that file unchanged from then on. An
//     io.SectionReader over an operating-system file (a segment) is copied by
//     the kernel (copy_file_range on Linux), anything else in 1 MiB pieces.
//   - s3://bucket/prefix (NewS3): through minio-go; above the 16 MiB part size
//     a parallel multipart upload, an io.SectionReader's parts read by position,
//     any other reader's read once, in order, into part buffers.
//
// A Put cut short by a crash leaves what neither List nor Delete reaches: a
// file:// temporary file, an incomplete S3 multipart upload (minio-go aborts
// the upload of a Put that fails, not of one whose process died). Both stores
// implement IncompleteRemover, which removes such leftovers under a prefix
// older than a given time (the tier's orphan sweep, a deleted topic's
// DeleteAll).
//
// Open picks the implementation from a URL.
//
// Concurrency: every method of every implementation is safe for concurrent use.
package remote
