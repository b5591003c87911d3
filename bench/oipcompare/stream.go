package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
)

// compareStream is the streaming table: the cost of one response of a
// request answered by 1,000 responses of 16 bytes (the flood model), for
// each pair of client and server: ours and tritonclient
// (bench_stream.py), our server (with the zero Options) and a Python
// grpcio server on tritonclient's definitions (stream_server.py). The
// pairs take turns, round after round, so that a noisy machine slows
// them alike; each round's figure is the median of its requests, and the
// table gives the median of the rounds.
func compareStream() error {
	const rounds, requests = 7, 10
	s := dloip.NewServer(dloip.Options{})
	if err := s.RegisterStream(floodModel()); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.Serve(lis)
	defer s.Shutdown()
	addr := lis.Addr().String()
	pyAddr, stop, err := startStreamServer()
	if err != nil {
		return err
	}
	defer stop()
	req := &dloip.InferRequest{Model: "flood", Inputs: []dloip.Input{{Name: "n", Tensor: dlpack.NewArray([]int32{1000}, []int64{1})}}}
	goClient := func(addr string) (time.Duration, error) {
		c, err := dloip.Dial(addr, dloip.ClientOptions{})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		var times []time.Duration
		for i := range requests + 2 {
			t0 := time.Now()
			n := 0
			for resp, err := range c.Responses(context.Background(), req) {
				if err != nil {
					return 0, err
				}
				if y := resp.Output("y"); y == nil || len(y.Bytes()) != 16 || y.Bytes()[15] != 15 {
					resp.Close()
					return 0, fmt.Errorf("response %d differs", n)
				}
				resp.Close()
				n++
			}
			if n != 1000 {
				return 0, fmt.Errorf("%d responses, want 1000", n)
			}
			if i >= 2 {
				times = append(times, time.Since(t0)/1000)
			}
		}
		return median(times), nil
	}
	tritonclient := func(addr string) (time.Duration, error) {
		cmd := exec.Command(*python, "bench_stream.py", addr, strconv.Itoa(requests))
		cmd.Dir = *scripts
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%v\n%s", err, out)
		}
		sec, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %v", out, err)
		}
		return time.Duration(sec * float64(time.Second)), nil
	}
	rows := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"Go client → Go server", func() (time.Duration, error) { return goClient(addr) }},
		{"tritonclient → Go server", func() (time.Duration, error) { return tritonclient(addr) }},
		{"tritonclient → Python grpcio server", func() (time.Duration, error) { return tritonclient(pyAddr) }},
		{"Go client → Python grpcio server", func() (time.Duration, error) { return goClient(pyAddr) }},
	}
	got := make([][]time.Duration, len(rows))
	for range rounds {
		for i, r := range rows {
			d, err := r.run()
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			got[i] = append(got[i], d)
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
	fmt.Print(b.String())
	return nil
}

// floodModel answers a request of n with n responses, each 16 bytes
// (0..15), the last of them final.
func floodModel() dloip.StreamModel {
	y := make([]byte, 16)
	for i := range y {
		y[i] = byte(i)
	}
	meta := dloip.ModelMetadata{Name: "flood", Inputs: []dloip.TensorMetadata{{Name: "n", Datatype: "INT32", Shape: []int64{1}}},
		Outputs: []dloip.TensorMetadata{{Name: "y", Datatype: "UINT8", Shape: []int64{16}}}}
	out := func() []dloip.Output {
		return []dloip.Output{{Name: "y", Tensor: dlpack.NewArray(y, []int64{16})}}
	}
	return dloip.StreamFunc(meta, func(ctx context.Context, req *dloip.Request, send func([]dloip.Output) error) ([]dloip.Output, error) {
		n := int(int32(binary.LittleEndian.Uint32(req.Inputs[0].Bytes())))
		if n < 1 {
			return nil, nil
		}
		for range n - 1 {
			if err := send(out()); err != nil {
				return nil, err
			}
		}
		return out(), nil
	})
}

// startStreamServer starts stream_server.py, which serves until its
// stdin closes, and returns its address.
func startStreamServer() (string, func(), error) {
	cmd := exec.Command(*python, "stream_server.py")
	cmd.Dir = *scripts
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	var port int
	if _, err := fmt.Fscanf(bufio.NewReader(stdout), "port %d\n", &port); err != nil {
		stop()
		return "", nil, fmt.Errorf("the Python stream server: %v\n%s", err, logs.String())
	}
	go io.Copy(io.Discard, stdout)
	return fmt.Sprintf("127.0.0.1:%d", port), stop, nil
}
