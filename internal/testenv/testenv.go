// Package testenv is test support shared by the project's packages: where
// the shared webhook corpus is, and one rule for a missing prerequisite —
// skip loudly on a developer's machine, fail under CI=true, so a green CI
// run can never hide a suite that did not run. Import it only from tests and
// test-support packages (storetest).
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Missing reports a missing prerequisite: the test fails when CI=true and
// is skipped, with a message no one can miss, elsewhere.
func Missing(tb testing.TB, what string, err error) {
	tb.Helper()
	msg := fmt.Sprintf("!!! %s is missing (%v): THIS TEST DID NOT RUN !!!", what, err)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// CorpusPath returns the shared webhook corpus folder, ../shared/webhook-corpus
// beside the module root, whether or not it exists.
func CorpusPath() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared", "webhook-corpus")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(d), "shared", "webhook-corpus")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "..", "shared", "webhook-corpus")
		}
	}
}

// Corpus returns the shared webhook corpus folder, calling Missing when it
// is absent.
func Corpus(tb testing.TB) string {
	tb.Helper()
	p := CorpusPath()
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		Missing(tb, "the shared webhook corpus at "+p, err)
	}
	return p
}

// Binary returns the path of an executable the test needs, calling Missing
// when it is not installed.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name, err)
	}
	return p
}

// Eventually polls cond every few milliseconds until it holds, and fails
// the test, naming what it waited for, if it does not within d. Tests wait
// with it instead of sleeping.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Clock is a settable clock for tests, safe for concurrent use. Pass its
// Now method wherever code under test takes a func() time.Time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Buffer is a bytes.Buffer safe for concurrent writes (a logger's, a child
// process's output) and the test's reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
