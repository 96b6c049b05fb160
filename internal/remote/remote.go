package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
)

// Errors a Store returns. Callers test them with errors.Is.
var (
	// ErrNotFound: no object has that key. Not retriable for that key.
	ErrNotFound = errors.New("remote: object not found")
	// ErrRange: a read starting past the object's end. Not retriable.
	ErrRange = errors.New("remote: read past end of object")
	// ErrInvalidKey: a key with an empty element, "..", or a leading slash.
	ErrInvalidKey = errors.New("remote: invalid key")
	// ErrUnavailable: the store could not be reached or failed the operation
	// (network, timeout, I/O error). Retriable: the caller backs off and retries.
	ErrUnavailable = errors.New("remote: store unavailable")
	// ErrUnsupportedURL: Open was given a scheme it has no implementation for.
	ErrUnsupportedURL = errors.New("remote: unsupported storage URL")
)

// Store is an object store. See the package doc for the contract.
type Store interface {
	// Put stores size bytes read from r under key, atomically.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get returns up to n bytes of key starting at off; n < 0 reads to the end.
	Get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys starting with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// NameSyncer is implemented by a Store whose objects become durable separately
// from their Put (a directory of files: file://). An uploader that writes a
// batch of objects before the one that names them all (the tier's segments
// before its manifest) puts them with PutUnsynced and then calls SyncNames once
// for the batch, rather than paying the fsyncs of a Put per object.
type NameSyncer interface {
	// PutUnsynced is Put, except that a crash before SyncNames(key) returned
	// nil may lose the object or leave it torn: the caller must not name it
	// anywhere durable (a manifest) before then.
	PutUnsynced(ctx context.Context, key string, r io.Reader, size int64) error
	// SyncNames makes the objects PutUnsynced put under keys durable, bytes
	// and names (it may make others durable too).
	SyncNames(ctx context.Context, keys ...string) error
}

// FileLinker is implemented by a Store that can make a whole local file an
// object without copying its bytes: file:// on the filesystem the file is on,
// with a hard link. The object and the file are then one file on disk, so the
// caller must guarantee what a copy would not need: the file's bytes are
// durable before it is linked, and nothing changes them in place afterwards
// (the storage package copies a linked segment before it truncates it).
type FileLinker interface {
	// LinkUnsynced makes the open file f (whole) the object key, durable like a
	// PutUnsynced object once SyncNames(key) returned nil. linked is false, with
	// nothing stored and a nil error, when the store cannot link f (another
	// filesystem, a filesystem without links, a file removed meanwhile): the
	// caller then puts a copy.
	LinkUnsynced(ctx context.Context, key string, f vfs.File) (linked bool, err error)
}

// IncompleteRemover is implemented by a Store in which a Put cut short by a
// crash leaves something behind that List does not show and Delete cannot
// name: file://'s temporary files, S3's incomplete multipart uploads. Nothing
// else ever removes it.
type IncompleteRemover interface {
	// RemoveIncomplete removes what interrupted Puts of keys under prefix
	// left behind and last wrote before before (a zero before: all of it),
	// and returns how many such leftovers it kept for being newer: a Put in
	// progress looks the same, so before must lie further back than a Put
	// can take.
	RemoveIncomplete(ctx context.Context, prefix string, before time.Time) (kept int, err error)
}

// Open returns the Store a --remote-storage URL names: file:///dir or
// s3://bucket/prefix?endpoint=host:port&region=r (see NewS3).
func Open(rawURL string, fsys vfs.FS) (Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "s3" {
		return NewS3(u)
	}
	return NewFile(fsys, u.Path)
}

// CheckURL reports whether Open supports rawURL, without touching the store.
func CheckURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

// parseURL checks a file:///dir or s3://bucket/prefix URL.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsupportedURL, rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: file URLs take no host (file:///path)", ErrUnsupportedURL, rawURL)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("%w: %q: file URLs need an absolute path", ErrUnsupportedURL, rawURL)
		}
		return u, nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("%w: %q: s3 URLs name a bucket (s3://bucket/prefix)", ErrUnsupportedURL, u.Redacted())
		}
		return u, nil
	}
	return nil, fmt.Errorf("%w: %q (supported: file:///path, s3://bucket/prefix)", ErrUnsupportedURL, rawURL)
}

// CheckKey reports whether key is a valid object key.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}
