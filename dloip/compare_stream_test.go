package dloip

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompareStream is the streaming table of make compare
// (DLOIP_COMPARE set, with DLOIP_PYTHON): the cost of one response of a
// request answered by 1,000 responses of 16 bytes (the flood model),
// for each pair of client and server: our client and tritonclient
// (testdata/bench_stream.py), our server and a Python grpcio server on
// tritonclient's definitions (testdata/stream_server.py). The pairs take
// turns, round after round, so that a noisy machine slows them alike;
// each round's figure is the median of its requests, and the table
// gives the median of the rounds. Plain go test skips it.
func TestCompareStream(t *testing.T) {
	if os.Getenv("DLOIP_COMPARE") == "" {
		t.Skip("DLOIP_COMPARE is not set (make compare sets it)")
	}
	py := peerPython(t)
	const rounds, requests = 7, 10
	s, goAddr := serve(t, Options{})
	if err := s.RegisterStream(floodModel()); err != nil {
		t.Fatal(err)
	}
	pyAddr := startStreamServer(t, py)
	req := &InferRequest{Model: "flood", Inputs: []Input{{Name: "n", Tensor: int32s(1000)}}}
	goClient := func(addr string) time.Duration {
		c := dial(t, addr, ClientOptions{})
		var times []time.Duration
		for i := range requests + 2 {
			t0 := time.Now()
			if n := streamFlood(t, c, req); n != 1000 {
				t.Fatalf("%d responses", n)
			}
			if i >= 2 {
				times = append(times, time.Since(t0)/1000)
			}
		}
		return median(times)
	}
	tritonclient := func(addr string) time.Duration {
		out, err := exec.Command(py, "testdata/bench_stream.py", addr, strconv.Itoa(requests)).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return time.Duration(sec * float64(time.Second))
	}
	rows := []struct {
		name string
		run  func() time.Duration
	}{
		{"Go client → Go server", func() time.Duration { return goClient(goAddr) }},
		{"tritonclient → Go server", func() time.Duration { return tritonclient(goAddr) }},
		{"tritonclient → Python grpcio server", func() time.Duration { return tritonclient(pyAddr) }},
		{"Go client → Python grpcio server", func() time.Duration { return goClient(pyAddr) }},
	}
	got := make([][]time.Duration, len(rows))
	for range rounds {
		for i, r := range rows {
			got[i] = append(got[i], r.run())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| 1,000 responses of 16 bytes to one request, per response (median of %d rounds of %d requests, the pairs taking turns) | per response | responses/s |\n|---|---|---|\n", rounds, requests)
	per := make([]time.Duration, len(rows))
	for i, r := range rows {
		per[i] = median(got[i])
		fmt.Fprintf(&b, "| %s | %v | %.0f |\n", r.name, per[i].Round(10*time.Nanosecond), 1/per[i].Seconds())
	}
	fmt.Fprintf(&b, "\ntritonclient against the Go server and against the Python one: %.1f× the responses per second.\n", float64(per[2])/float64(per[1]))
	fmt.Fprintf(&b, "Go → Go against tritonclient → Python: %.1f×.\n", float64(per[2])/float64(per[0]))
	t.Log(b.String())
	fmt.Println(b.String())
}
