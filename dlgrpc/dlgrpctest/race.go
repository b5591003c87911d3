//go:build race

package dlgrpctest

// RaceDetector says whether the program runs under the race detector,
// where sync.Pool drops a quarter of what is put back.
const RaceDetector = true
