//go:build linux && (amd64 || arm64)

package tensorfile

// With 48-bit (or wider) user address spaces, [64 TiB, 80 TiB) is above
// the Go heap and below the default mmap area and PIE binaries, and clear
// of what the sanitizers reserve (the race detector's shadow and
// metadata below 64 TiB, AddressSanitizer's allocator at 96 TiB).
const (
	hintBase = 0x4000_0000_0000
	hintSpan = 16 << 40
)
