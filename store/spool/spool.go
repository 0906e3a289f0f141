// Package spool keeps records on local disk, one file each, fsync'd before
// Append returns, until the caller removes them.
//
// It is the webhook ingest's fallback for when NATS JetStream is
// unreachable: the delivery is appended here and acknowledged, and a
// forwarder later reads the records back in order (List, Read), commits
// them to NATS, and removes them (Remove).
//
// Durability: Append writes a record to a temporary file in the spool
// directory, fsyncs and closes it, renames it to its final name and fsyncs
// the directory; only then does it return nil. A record Append returned nil
// for therefore survives the process being killed or the machine losing
// power right after. An interrupted Append leaves at most a temporary file
// (prefix ".tmp-"), which was never acknowledged; List ignores such files
// and Open removes them. A record file is never rewritten once renamed
// into place.
//
// Record file format (mode 0600):
//
//	offset 0   8 bytes  magic "TDSPOOL1"
//	offset 8   4 bytes  data length, uint32 big-endian
//	offset 12  4 bytes  CRC-32C (Castagnoli) of data, uint32 big-endian
//	offset 16  data
//
// Read checks all three and returns a *CorruptError when one does not hold,
// so a damaged or torn file is never mistaken for a record. The spool never
// deletes a record on its own: a corrupt one stays until the caller removes
// it or moves it aside for an operator (Quarantine, into dir/corrupt/).
//
// Record names are a 16-digit zero-padded hex sequence number, "-", 8 hex
// digits from crypto/rand, and ".rec" (e.g.
// "000000000000002a-9f3c01be.rec"). Open continues the sequence after the
// highest existing record, so names sort lexically in append order, across
// restarts too. Read, Remove and Quarantine accept only names of that form,
// so a caller can never make the spool touch another file.
//
// A Spool is safe for concurrent use. Several Spools (in one process or in
// several) may share a directory without losing or corrupting records, but
// each keeps its own counts (Len, Bytes) and enforces Options.MaxBytes on
// its own view only: the records found at Open, plus its own Appends, minus
// what its own Remove and Quarantine calls actually removed. Records
// appended by another Spool on the same directory are listed and readable,
// but counted only by a Spool opened after them.
//
// The package never logs; it returns errors.
package spool

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// ErrFull is wrapped by the error Append returns when the record would take
// the spool past Options.MaxBytes.
var ErrFull = errors.New("spool: full")

// castagnoli is the CRC-32C table every record's checksum uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record framing.
const (
	magic      = "TDSPOOL1"
	headerSize = len(magic) + 4 + 4

	recordSuffix = ".rec"
	tmpPrefix    = ".tmp-"
	seqDigits    = 16
	randDigits   = 8
	nameLen      = seqDigits + 1 + randDigits + len(recordSuffix)

	// corruptDir is the subdirectory Quarantine moves records into.
	corruptDir = "corrupt"
)

// CorruptError is returned by Read for a record file whose framing or
// checksum does not hold.
type CorruptError struct {
	// Name is the record's name.
	Name string
	// Reason says what does not hold.
	Reason string
}

// Error implements error.
func (e *CorruptError) Error() string {
	return "spool: record " + e.Name + " is corrupt: " + e.Reason
}

// Corrupt reports true: the record is torn or damaged, and retrying the
// read will not help (callers quarantine it). Callers that must not depend
// on this package test for the method.
func (e *CorruptError) Corrupt() bool { return true }

// Options configures Open.
type Options struct {
	// MaxBytes caps the total size of the record files (framing included);
	// 0 means no cap.
	MaxBytes int64
}

// Spool is a directory of records. It is safe for concurrent use.
type Spool struct {
	dir      string
	maxBytes int64

	mu       sync.Mutex
	next     uint64 // sequence number of the next Append
	count    int    // records counted
	bytes    int64  // their total size, framing included
	reserved int64  // bytes of Appends under way
}

// Open creates dir (mode 0700, parents too) if needed, removes leftover
// temporary files of interrupted Appends (they were never acknowledged),
// and counts the records and their bytes.
func Open(dir string, o Options) (*Spool, error) {
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("spool: open %s: negative MaxBytes %d", dir, o.MaxBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: open %s: create dir: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: open %s: %w", dir, err)
	}
	s := &Spool{
		dir:      dir,
		maxBytes: o.MaxBytes,
	}
	removedTmp := false
	var maxSeq uint64
	found := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tmpPrefix) && e.Type().IsRegular():
			err := os.Remove(filepath.Join(dir, name))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("spool: open %s: remove temporary file of an interrupted append: %w", dir, err)
			}
			removedTmp = removedTmp || err == nil
		case validName(name) && e.Type().IsRegular():
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed by another process meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("spool: open %s: %w", dir, err)
			}
			seq, err := strconv.ParseUint(name[:seqDigits], 16, 64)
			if err != nil { // cannot happen: validName checked the digits
				return nil, fmt.Errorf("spool: open %s: record %s: %w", dir, name, err)
			}
			if !found || seq > maxSeq {
				maxSeq, found = seq, true
			}
			s.count++
			s.bytes += info.Size()
		}
	}
	if found {
		if maxSeq == math.MaxUint64 {
			return nil, fmt.Errorf("spool: open %s: record sequence exhausted", dir)
		}
		s.next = maxSeq + 1
	}
	if removedTmp {
		if err := syncDir(dir); err != nil {
			return nil, fmt.Errorf("spool: open %s: %w", dir, err)
		}
	}
	return s, nil
}

// Append writes data as a new record: to a temporary file in dir, fsync,
// close, rename to its final name, fsync the directory. Only then does it
// return nil, with the record's name. Safe for concurrent use.
//
// When the record (framing included) would take the total past
// Options.MaxBytes, Append writes nothing and returns an error wrapping
// ErrFull. An empty record is allowed.
func (s *Spool) Append(data []byte) (name string, err error) {
	if uint64(len(data)) > math.MaxUint32 {
		return "", fmt.Errorf("spool: append: record of %d bytes is larger than the format allows (%d)", len(data), uint64(math.MaxUint32))
	}
	size := int64(headerSize) + int64(len(data))

	// Reserve the size and a sequence number.
	s.mu.Lock()
	if s.maxBytes > 0 && s.bytes+s.reserved+size > s.maxBytes {
		used := s.bytes + s.reserved
		s.mu.Unlock()
		return "", fmt.Errorf("%w: a record of %d bytes (framing included) would take the spool in %s from %d to %d bytes, "+
			"past its cap of %d bytes (--spool-max-bytes)", ErrFull, size, s.dir, used, used+size, s.maxBytes)
	}
	seq := s.next
	s.next++
	s.reserved += size
	s.mu.Unlock()
	committed := false
	defer func() {
		if !committed {
			s.mu.Lock()
			s.reserved -= size
			s.mu.Unlock()
		}
	}()

	var rnd [randDigits / 2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("spool: append: random name: %w", err)
	}
	name = fmt.Sprintf("%0*x-%s%s", seqDigits, seq, hex.EncodeToString(rnd[:]), recordSuffix)
	final := filepath.Join(s.dir, name)
	tmp := filepath.Join(s.dir, tmpPrefix+name)

	if err := s.writeTemp(tmp, data); err != nil {
		os.Remove(tmp) // best effort; Open removes it otherwise
		return "", fmt.Errorf("spool: append: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("spool: append: %w", err)
	}

	// The record is in place: count it now, so that a Remove by a reader
	// that finds it before we return subtracts what was added.
	s.mu.Lock()
	s.reserved -= size
	s.bytes += size
	s.count++
	s.mu.Unlock()
	committed = true

	if err := syncDir(s.dir); err != nil {
		// Not durable, so not acknowledged: take it back if it is still
		// there. If that fails too it stays a record (counted), which can
		// at worst be forwarded twice.
		if rmErr := os.Remove(final); rmErr == nil {
			s.uncount(size)
			syncDir(s.dir) // best effort
		}
		return "", fmt.Errorf("spool: append: %w", err)
	}
	return name, nil
}

// writeTemp writes data, framed, to a new file at path and fsyncs and
// closes it.
func (s *Spool) writeTemp(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	binary.BigEndian.PutUint32(hdr[len(magic):], uint32(len(data)))
	binary.BigEndian.PutUint32(hdr[len(magic)+4:], crc32.Checksum(data, castagnoli))
	if _, err := f.Write(hdr[:]); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// List returns the names of the records in the order they were appended
// (across restarts too). Temporary files and other files are left out.
func (s *Spool) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("spool: list %s: %w", s.dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if validName(e.Name()) && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Read returns a record's data, checked: a *CorruptError if the magic, the
// length or the CRC-32C does not hold; an error wrapping fs.ErrNotExist if
// the record is gone.
func (s *Spool) Read(name string) ([]byte, error) {
	if err := checkName("read", name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("spool: read %s: %w", name, err)
	}
	if len(b) < headerSize {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf("file of %d bytes is shorter than the %d-byte header", len(b), headerSize)}
	}
	if string(b[:len(magic)]) != magic {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf("bad magic %q, want %q", b[:len(magic)], magic)}
	}
	n := binary.BigEndian.Uint32(b[len(magic):])
	sum := binary.BigEndian.Uint32(b[len(magic)+4:])
	data := b[headerSize:]
	if uint64(n) != uint64(len(data)) {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf("header says %d data bytes, file holds %d", n, len(data))}
	}
	if got := crc32.Checksum(data, castagnoli); got != sum {
		return nil, &CorruptError{Name: name, Reason: fmt.Sprintf("CRC-32C of data is %08x, header says %08x", got, sum)}
	}
	return data, nil
}

// Remove deletes a record; removing one already gone is not an error. The
// counts drop only when this call removed the file, so two Spools (or
// processes) removing the same record subtract it once. The removal is not
// fsync'd: callers remove a record once it is safe elsewhere, and one that
// comes back after a power loss is only delivered again, which the caller
// recognises (ingest's forwarder: as a duplicate).
func (s *Spool) Remove(name string) error {
	if err := checkName("remove", name); err != nil {
		return err
	}
	path := filepath.Join(s.dir, name)
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("spool: remove %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("spool: remove %s: not a regular file (%s)", name, info.Mode().Type())
	}
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		return nil // removed by someone else meanwhile, who counts it
	} else if err != nil {
		return fmt.Errorf("spool: remove %s: %w", name, err)
	}
	s.uncount(info.Size())
	return nil
}

// Quarantine moves a record Read found corrupt into dir/corrupt/ (created
// with mode 0700), keeping it for an operator; it no longer counts or
// lists. A record already gone yields an error wrapping fs.ErrNotExist.
// Quarantine does not check the record: the caller decides.
func (s *Spool) Quarantine(name string) error {
	if err := checkName("quarantine", name); err != nil {
		return err
	}
	src := filepath.Join(s.dir, name)
	info, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("spool: quarantine %s: not a regular file (%s)", name, info.Mode().Type())
	}
	cdir := filepath.Join(s.dir, corruptDir)
	switch err := os.Mkdir(cdir, 0o700); {
	case err == nil:
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("spool: quarantine %s: %w", name, err)
		}
	case errors.Is(err, fs.ErrExist):
	default:
		return fmt.Errorf("spool: quarantine %s: create %s: %w", name, cdir, err)
	}
	dst := filepath.Join(cdir, name)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("spool: quarantine %s: %s already exists; not replacing it", name, dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	s.uncount(info.Size())
	if err := syncDir(cdir); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", name, err)
	}
	return nil
}

// Len reports the current number of records.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Bytes reports the current total size of the records, framing included.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Dir returns the directory.
func (s *Spool) Dir() string {
	return s.dir
}

// uncount drops one record of size bytes from the counts. They stay at
// zero or above even for a record another Spool appended, which this one
// never counted.
func (s *Spool) uncount(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count = max(s.count-1, 0)
	s.bytes = max(s.bytes-size, 0)
}

// checkName returns an error unless name has the form of a record name.
func checkName(op, name string) error {
	if validName(name) {
		return nil
	}
	return fmt.Errorf("spool: %s: invalid record name %q: want 16 hex digits, \"-\", 8 hex digits, %q", op, name, recordSuffix)
}

// validName reports whether name has the form of a record name:
// 16 lowercase hex digits, "-", 8 lowercase hex digits, ".rec".
func validName(name string) bool {
	if len(name) != nameLen || name[seqDigits] != '-' || !strings.HasSuffix(name, recordSuffix) {
		return false
	}
	return isHex(name[:seqDigits]) && isHex(name[seqDigits+1:seqDigits+1+randDigits])
}

// isHex reports whether s consists of lowercase hex digits only.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// syncDir fsyncs a directory, making renames and removals in it durable.
// Windows cannot fsync a directory; there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
