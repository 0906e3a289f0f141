package bus

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DropBehindSupported tells whether EmbeddedOptions.DropBehind works on
// this platform.
const DropBehindSupported = true

// pageCache drops pages with sync_file_range(2) and posix_fadvise(2).
type pageCache struct{}

func (pageCache) start(path string) error {
	return withFile(path, func(fd int) error {
		if err := unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
			return fmt.Errorf("start writeback: %w", err)
		}
		return nil
	})
}

func (pageCache) finish(path string) error {
	return withFile(path, func(fd int) error {
		// Wait for writeback already under way, write what is still
		// dirty, and wait for that too: only clean pages can be dropped.
		const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		if err := unix.SyncFileRange(fd, 0, 0, all); err != nil {
			return fmt.Errorf("write back: %w", err)
		}
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("drop from page cache: %w", err)
		}
		return nil
	})
}

// inMemory reports whether dir is on a file system kept in memory (tmpfs,
// ramfs), whose pages have no disk to go back to: nothing to drop.
func inMemory(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

func withFile(path string, f func(fd int) error) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	return f(fd)
}
