//go:build race

package dloip

// raceDetector: the tests run under the race detector, where sync.Pool
// drops a quarter of what is put back.
const raceDetector = true
