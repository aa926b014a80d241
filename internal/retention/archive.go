package retention

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// setNameLayout names a run's file set by its start, in UTC: names sort in
// the order the runs started.
const setNameLayout = "20060102T150405Z"

// manifestName is the file that describes a set.
const manifestName = "manifest.json"

// tableFile is one table's file of a set: the rows of PostgreSQL's COPY text
// format (one line a row, fields separated by tabs, NULL written \N), as
// COPY ... TO STDOUT wrote them. It counts the rows and adds up the money
// columns of what it writes, so the manifest describes the bytes on disk.
type tableFile struct {
	spec    table
	f       *os.File
	w       *bufio.Writer
	size    int64   // bytes written
	rows    int64   // complete lines written
	sums    []int64 // per spec.sums
	partial []byte  // a line not yet ended
	cols    []int   // index of each sum's column and of its condition's (-1: none)
	conds   []int
	failAt  int64 // test hook: fail a write once size would pass it (0: never)
	err     error // the first failure of this COPY (see Write)
}

// Write implements io.Writer for CopyTo. A failure is kept in t.err and the
// rest of the COPY is read and dropped rather than returned: an error from
// the writer makes pgconn close the connection mid-stream, and the batch's
// locks would then stay until the server noticed, instead of going with
// the rollback.
func (t *tableFile) Write(p []byte) (int, error) {
	if t.err == nil {
		t.err = t.write(p)
	}
	return len(p), nil
}

// failed is the failure of the COPY just read into t, if any.
func (t *tableFile) failed() error { return t.err }

func (t *tableFile) write(p []byte) error {
	if t.failAt > 0 && t.size+int64(len(p)) > t.failAt {
		return fmt.Errorf("write %s: %w", t.f.Name(), errInjected)
	}
	n, err := t.w.Write(p)
	t.size += int64(n)
	if err != nil {
		return fmt.Errorf("write %s: %w", t.f.Name(), err)
	}
	data := p[:n]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			t.partial = append(t.partial, data...)
			return nil
		}
		line := data[:i]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		if err := t.count(line); err != nil {
			return err
		}
		data = data[i+1:]
	}
}

// count adds one row. In the text format a tab or newline inside a value
// is written \t or \n, so splitting on them is exact.
func (t *tableFile) count(line []byte) error {
	t.rows++
	if len(t.cols) == 0 {
		return nil
	}
	fields := bytes.Split(line, []byte{'\t'})
	for i, c := range t.cols {
		if c >= len(fields) || (t.conds[i] >= 0 && (t.conds[i] >= len(fields) || string(fields[t.conds[i]]) == `\N`)) {
			continue
		}
		v, err := strconv.ParseInt(string(fields[c]), 10, 64)
		if err != nil {
			return fmt.Errorf("archive of %s: row %d: column %d is not a whole number: %w", t.spec.name, t.rows, c, err)
		}
		t.sums[i] += v
	}
	return nil
}

// fileState is where a table's file stood before a batch, to go back to it.
type fileState struct {
	size, rows int64
	sums       []int64
}

// set is one run's file set: a directory of its own under the archive
// directory, a file per table and the manifest.
type set struct {
	dir      string
	files    []*tableFile
	manifest Manifest
}

// newSet makes the run's directory and its empty files, and makes them
// durable: the directory entry in parent, the files' entries in the set.
// version is the database's schema version, columns its tables' columns.
func newSet(parent string, started time.Time, version int, specs []table, columns map[string][]string,
	failAt map[string]int64) (*set, error) {
	dir, err := os.MkdirTemp(parent, started.UTC().Format(setNameLayout)+"-*")
	if err != nil {
		return nil, fmt.Errorf("make the archive set: %w", err)
	}
	s := &set{dir: dir, manifest: newManifest(started, version)}
	for _, spec := range specs {
		f, err := os.OpenFile(filepath.Join(dir, spec.file()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("make the archive set: %w", err)
		}
		tf := &tableFile{spec: spec, f: f, w: bufio.NewWriterSize(f, 1<<16), sums: make([]int64, len(spec.sums)),
			failAt: failAt[spec.name]}
		for _, sm := range spec.sums {
			tf.cols = append(tf.cols, indexOf(columns[spec.name], sm.column))
			tf.conds = append(tf.conds, indexOf(columns[spec.name], sm.notNull))
		}
		s.files = append(s.files, tf)
		s.manifest.Tables = append(s.manifest.Tables, TableManifest{Table: spec.name, File: spec.file(),
			Columns: columns[spec.name]})
	}
	if err := errors.Join(syncDir(dir), syncDir(parent)); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func indexOf(cols []string, name string) int {
	for i, c := range cols {
		if c == name && name != "" {
			return i
		}
	}
	return -1
}

// mark is where the set stands now.
func (s *set) mark() setMark {
	m := setMark{files: make([]fileState, len(s.files)), batches: s.manifest.Batches, envelopes: s.manifest.Envelopes}
	for i, t := range s.files {
		m.files[i] = fileState{size: t.size, rows: t.rows, sums: append([]int64(nil), t.sums...)}
	}
	return m
}

// undo takes every file back to m: a batch whose deletion did not commit
// leaves no rows in the set.
func (s *set) undo(sm setMark) error {
	s.manifest.Batches, s.manifest.Envelopes = sm.batches, sm.envelopes
	m := sm.files
	var errs []error
	for i, t := range s.files {
		t.w.Reset(t.f)
		t.partial, t.err = t.partial[:0], nil
		t.size, t.rows, t.sums = m[i].size, m[i].rows, m[i].sums
		if err := t.f.Truncate(m[i].size); err != nil {
			errs = append(errs, fmt.Errorf("truncate %s: %w", t.f.Name(), err))
			continue
		}
		if _, err := t.f.Seek(m[i].size, 0); err != nil {
			errs = append(errs, fmt.Errorf("seek %s: %w", t.f.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// sync makes what was written durable: the buffers written out, every file
// fsynced (an unended line is an error: COPY ends every row).
func (s *set) sync() error {
	for _, t := range s.files {
		if len(t.partial) > 0 {
			return fmt.Errorf("archive of %s ends in the middle of a row", t.spec.name)
		}
		if err := t.w.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", t.f.Name(), err)
		}
		if err := t.f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", t.f.Name(), err)
		}
	}
	return nil
}

// writeManifest replaces the manifest with one describing the files as they
// are, durably: written to a temporary file, fsynced, renamed over the old
// one, and the directory fsynced.
func (s *set) writeManifest() error {
	m := s.manifest
	for i, t := range s.files {
		m.Tables[i].Rows = t.rows
		m.Tables[i].Sums = map[string]int64{}
		for j, sm := range t.spec.sums {
			m.Tables[i].Sums[sm.name] = t.sums[j]
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, manifestName+".tmp")
	if err := writeFileSync(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, manifestName)); err != nil {
		return fmt.Errorf("write the manifest: %w", err)
	}
	return syncDir(s.dir)
}

// empty reports whether no file of the set holds a byte.
func (s *set) empty() bool {
	for _, t := range s.files {
		if t.size > 0 {
			return false
		}
	}
	return true
}

func (s *set) close() {
	for _, t := range s.files {
		_ = t.f.Close()
	}
}

func writeFileSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// CheckDir refuses an archive directory that is not one; it is never
// created (a mistyped path must not swallow an archive). The daemon checks
// LEDGER_ARCHIVE_DIR with it at start.
func CheckDir(dir string) error {
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("archive directory (it is never created): %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("archive directory %s: %w", dir, errNotADirectory)
	}
	return nil
}

// syncDir fsyncs a directory, so the entries made in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
