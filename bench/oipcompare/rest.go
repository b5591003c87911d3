package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
)

// compareREST is the REST table: one FP32 tensor to an echo model and
// back, Go client to Go server over gRPC (grpcC), over REST with binary
// data and over REST with JSON values; and, as JSON at 4 KiB, kserve's
// REST client against kserve's own REST server (at kbase) and against
// ours. The rows are timed in rounds, each row in turn within a round and
// the order turned from round to round, so that they meet the same load;
// each figure is the median of the rounds' medians of single calls on a
// warm connection.
func compareREST(s *dloip.Server, grpcC *dloip.Client, kbase string) error {
	const rounds = 5
	reps := map[int]int{4 << 10: 200, 1 << 20: 50, 64 << 20: 4}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.ServeREST(lis)
	base := "http://" + lis.Addr().String()
	rest, err := dloip.DialREST(base, dloip.ClientOptions{MaxMessageBytes: 512 << 20})
	if err != nil {
		return err
	}
	defer rest.Close()

	type row struct {
		name  string
		sizes []int
		run   func(size int) (time.Duration, error)
	}
	goRow := func(c interface {
		Infer(context.Context, *dloip.InferRequest) (*dloip.InferResponse, error)
	}) func(int) (time.Duration, error) {
		return func(size int) (time.Duration, error) {
			data := make([]float32, size/4)
			for i := range data {
				data[i] = float32(i)
			}
			req := &dloip.InferRequest{Model: "echo_FP32", Inputs: []dloip.Input{{Name: "x_FP32", Tensor: dlpack.NewArray(data, []int64{int64(len(data))})}}}
			var times []time.Duration
			for i := range reps[size] + 2 {
				t0 := time.Now()
				resp, err := c.Infer(context.Background(), req)
				if err != nil {
					return 0, err
				}
				if i == 0 && string(resp.Output("x_FP32").Bytes()) != string(float32Bytes(data)) {
					resp.Close()
					return 0, fmt.Errorf("%d bytes: the output differs from the input", size)
				}
				resp.Close()
				times = append(times, time.Since(t0))
			}
			return median(times[2:]), nil
		}
	}
	pyRow := func(base, model, input string) func(int) (time.Duration, error) {
		return func(size int) (time.Duration, error) {
			cmd := exec.Command(*python, "bench_rest.py", base, model, input, fmt.Sprintf("%d:%d", size, reps[size]))
			cmd.Dir = *scripts
			out, err := cmd.CombinedOutput()
			if err != nil {
				return 0, fmt.Errorf("%v\n%s", err, out)
			}
			f := strings.Fields(strings.TrimSpace(string(out)))
			if len(f) == 0 {
				return 0, fmt.Errorf("no output")
			}
			sec, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %v", out, err)
			}
			return time.Duration(sec * float64(time.Second)), nil
		}
	}
	rows := []row{
		{"Go client → Go server, gRPC", sizes, goRow(grpcC)},
		{"Go client → Go server, REST, binary data", sizes, goRow(rest)},
		{"Go client → Go server, REST, JSON", sizes[:2], goRow(rest.WithJSON())},
		{"kserve REST client → kserve REST server, JSON", sizes[:1], pyRow(kbase, "echo_json", "x")},
		{"kserve REST client → Go REST server, JSON", sizes[:1], pyRow(base, "echo_FP32", "x_FP32")},
	}
	got := map[string]map[int][]time.Duration{}
	for r := range rounds {
		for k := range rows {
			w := rows[(k+r)%len(rows)]
			for _, size := range w.sizes {
				d, err := w.run(size)
				if err != nil {
					return fmt.Errorf("%s: %w", w.name, err)
				}
				if got[w.name] == nil {
					got[w.name] = map[int][]time.Duration{}
				}
				got[w.name][size] = append(got[w.name][size], d)
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
	fmt.Fprintf(&b, "Each round's ratio of REST binary to gRPC at 1 MiB: %s; at 64 MiB: %s.\n",
		roundRatios(got[rows[1].name][1<<20], got[rows[0].name][1<<20]), roundRatios(got[rows[1].name][64<<20], got[rows[0].name][64<<20]))
	fmt.Print(b.String())
	return nil
}

// roundRatios lists a[i]/b[i].
func roundRatios(a, b []time.Duration) string {
	var out []string
	for i := range a {
		out = append(out, fmt.Sprintf("%.2f", float64(a[i])/float64(b[i])))
	}
	return strings.Join(out, ", ")
}
