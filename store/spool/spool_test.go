package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// open opens a spool on dir with o, failing the test on error.
func open(t *testing.T, dir string, o Options) *Spool {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

// mustAppend appends data, failing the test on error.
func mustAppend(t *testing.T, s *Spool, data []byte) string {
	t.Helper()
	name, err := s.Append(data)
	if err != nil {
		t.Fatalf("Append(%q): %v", data, err)
	}
	return name
}

// mustList lists s, failing the test on error.
func mustList(t *testing.T, s *Spool) []string {
	t.Helper()
	names, err := s.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return names
}

// checkCounts checks Len and Bytes.
func checkCounts(t *testing.T, s *Spool, wantLen int, wantBytes int64) {
	t.Helper()
	if got := s.Len(); got != wantLen {
		t.Errorf("Len() = %d, want %d", got, wantLen)
	}
	if got := s.Bytes(); got != wantBytes {
		t.Errorf("Bytes() = %d, want %d", got, wantBytes)
	}
}

// recSize is the size of a record file holding n data bytes.
func recSize(n int) int64 { return int64(headerSize + n) }

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	nameRE := regexp.MustCompile(`^[0-9a-f]{16}-[0-9a-f]{8}\.rec$`)
	checkCounts(t, s, 0, 0)
	if names := mustList(t, s); len(names) != 0 {
		t.Fatalf("List of a new spool = %q, want none", names)
	}

	records := [][]byte{
		[]byte(`{"a":1}`),
		{},
		[]byte("third"),
		bytes.Repeat([]byte{0, 1, 2, 0xff}, 10000),
		[]byte("last"),
	}
	var names []string
	var total int64
	for _, r := range records {
		name := mustAppend(t, s, r)
		if !nameRE.MatchString(name) {
			t.Errorf("Append returned name %q, not of the record form", name)
		}
		names = append(names, name)
		total += recSize(len(r))
	}
	if !strings.HasPrefix(names[0], "0000000000000000-") || !strings.HasPrefix(names[1], "0000000000000001-") {
		t.Errorf("first names = %q, want sequence 0, 1", names[:2])
	}
	if got := mustList(t, s); !slices.Equal(got, names) {
		t.Fatalf("List() = %q, want %q (append order)", got, names)
	}
	for i, name := range names {
		got, err := s.Read(name)
		if err != nil {
			t.Fatalf("Read(%s): %v", name, err)
		}
		if !bytes.Equal(got, records[i]) {
			t.Errorf("Read(%s) = %d bytes, want %d bytes %q...", name, len(got), len(records[i]), records[i][:min(len(records[i]), 8)])
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() != recSize(len(records[i])) {
			t.Errorf("file %s is %d bytes, want %d", name, info.Size(), recSize(len(records[i])))
		}
	}
	checkCounts(t, s, len(records), total)

	// The file format is the documented one.
	raw, err := os.ReadFile(filepath.Join(dir, names[2]))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("TDSPOOL1\x00\x00\x00\x05"), 0, 0, 0, 0)
	want = append(want, "third"...)
	crc := crcOf(t, []byte("third"))
	copy(want[12:16], crc)
	if !bytes.Equal(raw, want) {
		t.Errorf("record file = %x, want %x", raw, want)
	}

	// Removing records leaves the others in order.
	if err := s.Remove(names[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(names[3]); err != nil {
		t.Fatal(err)
	}
	wantNames := []string{names[0], names[2], names[4]}
	if got := mustList(t, s); !slices.Equal(got, wantNames) {
		t.Errorf("List() after removes = %q, want %q", got, wantNames)
	}
	checkCounts(t, s, 3, total-recSize(0)-recSize(len(records[3])))
	if _, err := s.Read(names[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a removed record: err = %v, want fs.ErrNotExist", err)
	}
}

// crcOf returns the big-endian CRC-32C of data, computed independently of
// the package (bitwise, reflected polynomial 0x82F63B78).
func crcOf(t *testing.T, data []byte) []byte {
	t.Helper()
	c := ^uint32(0)
	for _, b := range data {
		c ^= uint32(b)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0x82F63B78
			} else {
				c >>= 1
			}
		}
	}
	c = ^c
	return []byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}
}

func TestOrderAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	var names []string
	for i := range 3 {
		names = append(names, mustAppend(t, s, fmt.Appendf(nil, "old %d", i)))
	}
	// Remove the first so the sequence is not just the record count.
	if err := s.Remove(names[0]); err != nil {
		t.Fatal(err)
	}
	names = names[1:]

	s2 := open(t, dir, Options{})
	checkCounts(t, s2, 2, recSize(5)*2)
	for i := range 3 {
		name := mustAppend(t, s2, fmt.Appendf(nil, "new %d", i))
		if name <= names[len(names)-1] {
			t.Errorf("new name %s sorts before old %s", name, names[len(names)-1])
		}
		names = append(names, name)
	}
	if !strings.HasPrefix(names[2], "0000000000000003-") {
		t.Errorf("first name after reopen = %s, want sequence 3", names[2])
	}
	if got := mustList(t, s2); !slices.Equal(got, names) {
		t.Fatalf("List() = %q, want %q", got, names)
	}
	checkCounts(t, s2, 5, recSize(5)*5)

	// A third open sees them all, in order.
	s3 := open(t, dir, Options{})
	if got := mustList(t, s3); !slices.Equal(got, names) {
		t.Fatalf("List() after second reopen = %q, want %q", got, names)
	}
	checkCounts(t, s3, 5, recSize(5)*5)
	for i, name := range names {
		want := fmt.Sprintf("old %d", i+1)
		if i >= 2 {
			want = fmt.Sprintf("new %d", i-2)
		}
		got, err := s3.Read(name)
		if err != nil || string(got) != want {
			t.Errorf("Read(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestOpenRemovesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	kept := mustAppend(t, s, []byte("kept"))

	// An interrupted Append leaves its temporary file; here, one that got as
	// far as a complete record and one torn mid-write.
	full, err := os.ReadFile(filepath.Join(dir, kept))
	if err != nil {
		t.Fatal(err)
	}
	tmps := []string{
		tmpPrefix + "0000000000000001-00000000.rec",
		tmpPrefix + "0000000000000002-00000000.rec",
	}
	if err := os.WriteFile(filepath.Join(dir, tmps[0]), full, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tmps[1]), full[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	// Files the spool does not own are left alone.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	if got := mustList(t, s); !slices.Equal(got, []string{kept}) {
		t.Errorf("List() with temporary files = %q, want only %q", got, kept)
	}

	s2 := open(t, dir, Options{})
	for _, tmp := range tmps {
		if _, err := os.Stat(filepath.Join(dir, tmp)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("temporary file %s after Open: err = %v, want it removed", tmp, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Errorf("Open touched a file it does not own: %v", err)
	}
	if got := mustList(t, s2); !slices.Equal(got, []string{kept}) {
		t.Errorf("List() after Open = %q, want %q", got, kept)
	}
	checkCounts(t, s2, 1, recSize(4))
	// The temporary names were sequence 1 and 2, but only records count.
	if name := mustAppend(t, s2, nil); !strings.HasPrefix(name, "0000000000000001-") {
		t.Errorf("Append after Open = %s, want sequence 1", name)
	}
}

func TestFull(t *testing.T) {
	dir := t.TempDir()
	rec := []byte("0123456789")
	s := open(t, dir, Options{MaxBytes: 3 * recSize(len(rec))})

	var names []string
	for range 3 { // exactly fills the cap
		names = append(names, mustAppend(t, s, rec))
	}
	checkCounts(t, s, 3, 3*recSize(len(rec)))

	for _, data := range [][]byte{rec, {}} {
		name, err := s.Append(data)
		if !errors.Is(err, ErrFull) {
			t.Fatalf("Append(%q) over the cap: name %q, err = %v, want ErrFull", data, name, err)
		}
		if name != "" {
			t.Errorf("Append over the cap returned name %q", name)
		}
		msg := err.Error()
		for _, want := range []string{"--spool-max-bytes", fmt.Sprint(3 * recSize(len(rec))), fmt.Sprint(recSize(len(data)))} {
			if !strings.Contains(msg, want) {
				t.Errorf("ErrFull message %q lacks %q", msg, want)
			}
		}
	}
	checkCounts(t, s, 3, 3*recSize(len(rec)))
	if got := mustList(t, s); !slices.Equal(got, names) {
		t.Errorf("List() after refused Appends = %q, want %q", got, names)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("dir holds %d entries after refused Appends, want 3 (nothing written)", len(entries))
	}

	// A record bigger than the whole cap is refused too.
	if _, err := s.Append(make([]byte, 1000)); !errors.Is(err, ErrFull) {
		t.Errorf("Append of a record bigger than the cap: err = %v, want ErrFull", err)
	}

	if err := s.Remove(names[0]); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, s, 2, 2*recSize(len(rec)))
	mustAppend(t, s, rec)
	checkCounts(t, s, 3, 3*recSize(len(rec)))

	// Records found at Open count against the cap.
	s2 := open(t, dir, Options{MaxBytes: 3 * recSize(len(rec))})
	if _, err := s2.Append(nil); !errors.Is(err, ErrFull) {
		t.Errorf("Append on a reopened full spool: err = %v, want ErrFull", err)
	}
	if _, err := Open(t.TempDir(), Options{MaxBytes: -1}); err == nil {
		t.Error("Open with negative MaxBytes succeeded")
	}
}

func TestFullUnderConcurrency(t *testing.T) {
	rec := []byte("payload")
	const room = 10
	s := open(t, t.TempDir(), Options{MaxBytes: room * recSize(len(rec))})

	const goroutines, each = 16, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	for range goroutines {
		wg.Go(func() {
			for range each {
				_, err := s.Append(rec)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrFull):
					full++
				default:
					t.Errorf("Append: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != room || full != goroutines*each-room {
		t.Errorf("%d Appends succeeded and %d were full, want %d and %d", ok, full, room, goroutines*each-room)
	}
	checkCounts(t, s, room, room*recSize(len(rec)))
	if got := mustList(t, s); len(got) != room {
		t.Errorf("List() holds %d records, want %d", len(got), room)
	}
}

func TestFailedAppendReleasesReservation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	rec := []byte("x")
	s := open(t, dir, Options{MaxBytes: recSize(len(rec))})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(rec); err == nil || errors.Is(err, ErrFull) {
		t.Fatalf("Append into a missing dir: err = %v, want a write error", err)
	}
	checkCounts(t, s, 0, 0)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, rec) // the failed one's reservation was released
	checkCounts(t, s, 1, recSize(len(rec)))
}

func TestRemoveTwice(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	name := mustAppend(t, s, []byte("once"))
	other := mustAppend(t, s, []byte("other"))
	for i := range 2 {
		if err := s.Remove(name); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
		checkCounts(t, s, 1, recSize(5))
	}
	if err := s.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(other); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, s, 0, 0)
	// A record that never existed.
	if err := s.Remove("00000000000000ff-00000000.rec"); err != nil {
		t.Errorf("Remove of a record never there: %v", err)
	}
	checkCounts(t, s, 0, 0)
}

func TestRemoveTwoSpools(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, Options{})
	x := mustAppend(t, a, []byte("x"))
	y := mustAppend(t, a, []byte("yy"))
	b := open(t, dir, Options{})
	checkCounts(t, b, 2, recSize(1)+recSize(2))

	// Both remove x: only a's call removed it, so only a subtracts.
	if err := a.Remove(x); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(x); err != nil {
		t.Fatalf("second Spool removing a removed record: %v", err)
	}
	checkCounts(t, a, 1, recSize(2))
	checkCounts(t, b, 2, recSize(1)+recSize(2)) // b did not remove x

	// Both remove y, b first.
	if err := b.Remove(y); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(y); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, b, 1, recSize(1))
	checkCounts(t, a, 1, recSize(2))

	// a removes a big record b appended, which a never counted: a's counts
	// stay at zero or above.
	z := mustAppend(t, b, make([]byte, 1000))
	if err := a.Remove(z); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(z); err != nil {
		t.Fatal(err)
	}
	if a.Bytes() < 0 || a.Len() < 0 {
		t.Errorf("a: Len() = %d, Bytes() = %d, want neither negative", a.Len(), a.Bytes())
	}
	if err := b.Remove(z); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, b, 2, recSize(1)+recSize(1000)) // b removed neither x nor z

	// A fresh Spool sees the truth.
	checkCounts(t, open(t, dir, Options{}), 0, 0)
}

func TestConcurrentRemoveSameRecord(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, Options{})
	var names []string
	for i := range 50 {
		names = append(names, mustAppend(t, a, fmt.Appendf(nil, "%03d", i)))
	}
	b := open(t, dir, Options{})
	var wg sync.WaitGroup
	for _, s := range []*Spool{a, a, b, b} {
		wg.Go(func() {
			for _, name := range names {
				if err := s.Remove(name); err != nil {
					t.Errorf("Remove(%s): %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	// Each record was removed by exactly one call, so the two Spools'
	// subtractions add up to the total.
	total := int64(len(names)) * recSize(3)
	removedA, removedB := total-a.Bytes(), total-b.Bytes()
	if removedA+removedB != total || a.Bytes() < 0 || b.Bytes() < 0 {
		t.Errorf("a.Bytes() = %d, b.Bytes() = %d: subtractions add up to %d, want %d", a.Bytes(), b.Bytes(), removedA+removedB, total)
	}
	if a.Len()+b.Len() != len(names) {
		t.Errorf("a.Len() = %d, b.Len() = %d, want them to add up to %d", a.Len(), b.Len(), len(names))
	}
	if got := mustList(t, a); len(got) != 0 {
		t.Errorf("List() after removing everything = %q", got)
	}
}

func TestCorruption(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	data := []byte("a webhook delivery body")
	name := mustAppend(t, s, data)
	path := filepath.Join(dir, name)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	flipped := slices.Clone(good)
	flipped[headerSize+3] ^= 0x01
	badMagic := slices.Clone(good)
	badMagic[0] = 'X'
	longer := append(slices.Clone(good), '!')
	badLength := slices.Clone(good)
	badLength[11]++
	cases := []struct {
		desc   string
		file   []byte
		reason string
	}{
		{"one data byte flipped", flipped, "CRC-32C"},
		{"truncated in the data", good[:len(good)-5], "header says"},
		{"truncated in the header", good[:7], "shorter than"},
		{"empty", nil, "shorter than"},
		{"bad magic", badMagic, "magic"},
		{"extra byte", longer, "header says"},
		{"length field changed", badLength, "header says"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			if err := os.WriteFile(path, c.file, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := s.Read(name)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Read = %q, %v; want a *CorruptError", got, err)
			}
			if ce.Name != name {
				t.Errorf("CorruptError.Name = %q, want %q", ce.Name, name)
			}
			if !strings.Contains(ce.Reason, c.reason) {
				t.Errorf("CorruptError.Reason = %q, want it to mention %q", ce.Reason, c.reason)
			}
			want := "spool: record " + name + " is corrupt: " + ce.Reason
			if err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
	// Put it back: it reads again.
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(name); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Read of the restored record = %q, %v", got, err)
	}
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	before := mustAppend(t, s, []byte("before"))
	bad := mustAppend(t, s, []byte("to be damaged"))
	after := mustAppend(t, s, []byte("after"))
	path := filepath.Join(dir, bad)
	if err := os.Truncate(path, 20); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := s.Read(bad); !errors.As(err, &ce) {
		t.Fatalf("Read of a truncated record: err = %v, want *CorruptError", err)
	}
	// Truncation changed its size on disk under the Spool; it is the count
	// of Open that matters here.
	s = open(t, dir, Options{})
	checkCounts(t, s, 3, recSize(6)+20+recSize(5))

	if err := s.Quarantine(bad); err != nil {
		t.Fatalf("Quarantine: %v", err)
	}
	if got := mustList(t, s); !slices.Equal(got, []string{before, after}) {
		t.Errorf("List() after Quarantine = %q, want %q", got, []string{before, after})
	}
	checkCounts(t, s, 2, recSize(6)+recSize(5))
	kept, err := os.ReadFile(filepath.Join(dir, "corrupt", bad))
	if err != nil {
		t.Fatalf("quarantined record not in corrupt/: %v", err)
	}
	if len(kept) != 20 {
		t.Errorf("quarantined file is %d bytes, want the 20 it had", len(kept))
	}
	info, err := os.Stat(filepath.Join(dir, "corrupt"))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o700 {
		t.Errorf("corrupt/ has mode %v, want 0700", info.Mode().Perm())
	}
	if _, err := s.Read(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a quarantined record: err = %v, want fs.ErrNotExist", err)
	}
	if err := s.Quarantine(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Quarantine of a record already gone: err = %v, want fs.ErrNotExist", err)
	}
	// corrupt/ already exists: a second quarantine works too.
	if err := s.Quarantine(before); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, s, 1, recSize(5))
	// Reopening does not count or list quarantined records.
	s2 := open(t, dir, Options{})
	checkCounts(t, s2, 1, recSize(5))
	if got := mustList(t, s2); !slices.Equal(got, []string{after}) {
		t.Errorf("List() after reopen = %q, want %q", got, []string{after})
	}
}

func TestInvalidNames(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "spool")
	s := open(t, dir, Options{})
	valid := mustAppend(t, s, []byte("v"))
	// Files that a bad name could reach.
	for _, p := range []string{filepath.Join(parent, "x.rec"), filepath.Join(dir, "x.txt"), filepath.Join(dir, "a", "b.rec")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not yours"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	names := []string{
		"../x.rec", "a/b.rec", "x.txt", "", ".rec", "x.rec",
		"/" + valid, "./" + valid, valid + "/",
		`a\b.rec`,
		tmpPrefix + valid,
		"00000000000000AB-00000000.rec", // uppercase hex
		"000000000000000-000000000.rec", // misplaced dash
		"0000000000000000-0000000g.rec", // not hex
		valid[:len(valid)-4] + ".txt",
		"../spool/" + valid,
	}
	for _, name := range names {
		if _, err := s.Read(name); err == nil || !strings.Contains(err.Error(), "invalid record name") {
			t.Errorf("Read(%q): err = %v, want an invalid name error", name, err)
		}
		if err := s.Remove(name); err == nil || !strings.Contains(err.Error(), "invalid record name") {
			t.Errorf("Remove(%q): err = %v, want an invalid name error", name, err)
		}
		if err := s.Quarantine(name); err == nil || !strings.Contains(err.Error(), "invalid record name") {
			t.Errorf("Quarantine(%q): err = %v, want an invalid name error", name, err)
		}
	}
	for _, p := range []string{filepath.Join(parent, "x.rec"), filepath.Join(dir, "x.txt"), filepath.Join(dir, "a", "b.rec"), filepath.Join(dir, valid)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s after invalid names: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "corrupt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt/ created by a rejected Quarantine: %v", err)
	}
	checkCounts(t, s, 1, recSize(1))
}

func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	const goroutines, each = 16, 100
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		datas = map[string]string{} // name → data
		total int64
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				data := fmt.Sprintf("goroutine %d record %d", g, i)
				name, err := s.Append([]byte(data))
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				if prev, dup := datas[name]; dup {
					t.Errorf("name %s returned twice (%q and %q)", name, prev, data)
				}
				datas[name] = data
				total += recSize(len(data))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(datas) != goroutines*each {
		t.Fatalf("%d distinct names, want %d", len(datas), goroutines*each)
	}
	checkCounts(t, s, goroutines*each, total)
	names := mustList(t, s)
	if len(names) != goroutines*each {
		t.Fatalf("List() holds %d records, want %d", len(names), goroutines*each)
	}
	if !slices.IsSorted(names) {
		t.Error("List() is not sorted")
	}
	seqs := map[string]bool{}
	for _, name := range names {
		want, ok := datas[name]
		if !ok {
			t.Errorf("List() holds %s, which no Append returned", name)
			continue
		}
		got, err := s.Read(name)
		if err != nil || string(got) != want {
			t.Errorf("Read(%s) = %q, %v; want %q", name, got, err, want)
		}
		seqs[name[:16]] = true
	}
	if len(seqs) != goroutines*each {
		t.Errorf("%d distinct sequence numbers, want %d", len(seqs), goroutines*each)
	}
	// Each goroutine's own records list in the order it appended them.
	for g := range goroutines {
		prefix := fmt.Sprintf("goroutine %d record ", g)
		next := 0
		for _, name := range names {
			if d := datas[name]; strings.HasPrefix(d, prefix) {
				if d != fmt.Sprint(prefix, next) {
					t.Errorf("goroutine %d: listed %q, want record %d", g, d, next)
				}
				next++
			}
		}
	}
}

func TestModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits on Windows")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b", "spool")
	s := open(t, dir, Options{})
	for _, d := range []string{filepath.Join(base, "a"), filepath.Join(base, "a", "b"), dir} {
		info, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if !info.IsDir() || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want a directory with mode 0700", d, info.Mode())
		}
	}
	for _, data := range [][]byte{nil, []byte("secret")} {
		name := mustAppend(t, s, data)
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
			t.Errorf("record %s: mode %v, want a regular file with mode 0600", name, info.Mode())
		}
	}
}
