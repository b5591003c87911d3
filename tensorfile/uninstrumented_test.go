//go:build !race && !asan

package tensorfile_test

// instrumented: the tests run under the race detector or the address
// sanitizer, where memory and time cost several times more.
const instrumented = false
