//go:build unix && !(linux && (amd64 || arm64))

package tensorfile

// No address hints: the kernel places every mapping.
const (
	hintBase = 0
	hintSpan = 1 << 30
)
