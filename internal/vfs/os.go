package vfs

import (
	"os"
	"sort"
)

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) OSFile() *os.File { return f.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644))
}

func (osFS) Open(name string) (File, error) { return wrap(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644))
}

func (osFS) Remove(name string) error                 { return os.Remove(name) }
func (osFS) RemoveAll(name string) error              { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error     { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, p os.FileMode) error { return os.MkdirAll(dir, p) }
func (osFS) Stat(name string) (os.FileInfo, error)    { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
