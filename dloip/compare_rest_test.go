package dloip

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// TestCompareREST is the REST table of make compare (DLOIP_COMPARE set,
// with DLOIP_PYTHON): one FP32 tensor to an echo model and back, Go
// client to Go server over gRPC, over REST with binary data and over
// REST with JSON values; and, as JSON at 4 KiB, kserve's REST client
// against kserve's own REST server and against ours. The rows are timed
// in rounds, each row in turn within a round and the order turned from
// round to round, so that they meet the same load; each figure is the
// median of the rounds' medians of single calls on a warm connection.
// Printed as a Markdown table, with the ratios; plain go test skips it.
func TestCompareREST(t *testing.T) {
	if os.Getenv("DLOIP_COMPARE") == "" {
		t.Skip("DLOIP_COMPARE is not set (make compare sets it)")
	}
	py := peerPython(t)
	const rounds = 5
	sizes := []int{4 << 10, 1 << 20, 64 << 20}
	reps := map[int]int{4 << 10: 200, 1 << 20: 50, 64 << 20: 4}
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1}}
	opts := Options{MaxMessageBytes: 1 << 30}
	_, addr, base := serveBoth(t, opts, echoModel("echo", x))
	grpcC := dial(t, addr, ClientOptions{MaxMessageBytes: 1 << 30})
	rest := dialREST(t, base, ClientOptions{MaxMessageBytes: 1 << 30})
	kbase := startKserveREST(t, py)

	type row struct {
		name  string
		sizes []int
		run   func(size int) time.Duration
	}
	goRow := func(c interface {
		Infer(context.Context, *InferRequest) (*InferResponse, error)
	}) func(int) time.Duration {
		return func(size int) time.Duration {
			in := newRaw(t, dlpack.Float32, int64(size/4))
			req := &InferRequest{Model: "echo", Inputs: []Input{{Name: "x", Tensor: in}}}
			var times []time.Duration
			for range reps[size] + 2 {
				t0 := time.Now()
				resp, err := c.Infer(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Close()
				times = append(times, time.Since(t0))
			}
			return median(times[2:])
		}
	}
	pyRow := func(base, model string) func(int) time.Duration {
		return func(size int) time.Duration {
			out, err := exec.Command(py, "testdata/bench_rest.py", base, model, "x", fmt.Sprintf("%d:%d", size, reps[size])).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			f := strings.Fields(strings.TrimSpace(string(out)))
			sec, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return time.Duration(sec * float64(time.Second))
		}
	}
	rows := []row{
		{"Go client → Go server, gRPC", sizes, goRow(grpcC)},
		{"Go client → Go server, REST, binary data", sizes, goRow(rest)},
		{"Go client → Go server, REST, JSON", sizes[:2], goRow(rest.WithJSON())},
		{"kserve REST client → kserve REST server, JSON", sizes[:1], pyRow(kbase, "echo_json")},
		{"kserve REST client → Go REST server, JSON", sizes[:1], pyRow(base, "echo")},
	}
	got := map[string]map[int][]time.Duration{}
	for r := range rounds {
		for k := range rows {
			w := rows[(k+r)%len(rows)]
			for _, size := range w.sizes {
				if got[w.name] == nil {
					got[w.name] = map[int][]time.Duration{}
				}
				got[w.name][size] = append(got[w.name][size], w.run(size))
			}
		}
	}
	fig := func(name string, size int) time.Duration { return median(got[name][size]) }
	var b strings.Builder
	fmt.Fprintf(&b, "\n| FP32 tensor there and back, median of %d rounds' medians | 4 KiB | 1 MiB | 64 MiB |\n|---|---|---|---|\n", rounds)
	for _, w := range rows {
		fmt.Fprintf(&b, "| %s |", w.name)
		for _, size := range sizes {
			if len(got[w.name][size]) == 0 {
				b.WriteString(" |")
				continue
			}
			d := fig(w.name, size)
			fmt.Fprintf(&b, " %v (%.0f MB/s) |", d.Round(time.Microsecond), 2*float64(size)/d.Seconds()/1e6)
		}
		b.WriteString("\n")
	}
	ratio := func(a, c string, size int) float64 { return float64(fig(a, size)) / float64(fig(c, size)) }
	fmt.Fprintf(&b, "\nREST with binary data against gRPC, Go to Go: %.2f× the time at 1 MiB, %.2f× at 64 MiB (goal at most 1.3×).\n",
		ratio(rows[1].name, rows[0].name, 1<<20), ratio(rows[1].name, rows[0].name, 64<<20))
	fmt.Fprintf(&b, "REST JSON at 4 KiB, Go to Go, against kserve's REST client and server: %.2f× the time (goal within 2×); kserve's client against the Go server and against its own: %.2f×.\n",
		ratio(rows[2].name, rows[3].name, 4<<10), ratio(rows[4].name, rows[3].name, 4<<10))
	fmt.Fprintf(&b, "Each round's ratio of REST binary to gRPC at 1 MiB: %s; at 64 MiB: %s.\n", roundRatios(got[rows[1].name][1<<20], got[rows[0].name][1<<20]),
		roundRatios(got[rows[1].name][64<<20], got[rows[0].name][64<<20]))
	t.Log(b.String())
	fmt.Println(b.String())
}

// roundRatios lists a[i]/b[i].
func roundRatios(a, b []time.Duration) string {
	var out []string
	for i := range a {
		out = append(out, fmt.Sprintf("%.2f", float64(a[i])/float64(b[i])))
	}
	return strings.Join(out, ", ")
}
