//go:build !linux

package bus

// DropBehindSupported tells whether EmbeddedOptions.DropBehind works on
// this platform.
const DropBehindSupported = false

type pageCache struct{}

func (pageCache) start(string) error  { return ErrDropBehindUnsupported }
func (pageCache) finish(string) error { return ErrDropBehindUnsupported }

func inMemory(string) bool { return false }
