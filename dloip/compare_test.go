package dloip

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// TestCompare is the throughput table of make compare (DLOIP_COMPARE
// set, with DLOIP_PYTHON): one FP32 tensor to an echo model and back, at
// 4 KiB, 1 MiB and 64 MiB, the median of single calls on a warm
// connection, for each pair of client and server, beside memcpy of the
// same bytes. Printed as a Markdown table; plain go test skips it.
func TestCompare(t *testing.T) {
	if os.Getenv("DLOIP_COMPARE") == "" {
		t.Skip("DLOIP_COMPARE is not set (make compare sets it)")
	}
	py := peerPython(t)
	sizes := []int{4 << 10, 1 << 20, 64 << 20}
	reps := map[int]int{4 << 10: 200, 1 << 20: 30, 64 << 20: 5}
	plan := func() []string {
		var p []string
		for _, s := range sizes {
			p = append(p, fmt.Sprintf("%d:%d", s, reps[s]))
		}
		return p
	}
	rows := map[string]map[int]time.Duration{}
	var order []string
	add := func(row string, size int, d time.Duration) {
		if rows[row] == nil {
			rows[row] = map[int]time.Duration{}
			order = append(order, row)
		}
		rows[row][size] = d
	}
	python := func(row, peer, addr, model, input string) {
		out, err := exec.Command(py, append([]string{"testdata/bench_clients.py", peer, addr, model, input}, plan()...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", row, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			size, _ := strconv.Atoi(f[0])
			sec, _ := strconv.ParseFloat(f[1], 64)
			add(row, size, time.Duration(sec*float64(time.Second)))
		}
	}
	goClient := func(row string, c *Client, model, input string, region bool) {
		for _, size := range sizes {
			x := newRaw(t, dlpack.Float32, int64(size/4))
			req := &InferRequest{Model: model, Inputs: []Input{{Name: input, Tensor: x}}}
			if region {
				req = shmRequest(t, c, model, input, size)
			}
			var times []time.Duration
			for i := range reps[size] + 2 {
				t0 := time.Now()
				resp, err := c.Infer(context.Background(), req)
				if err != nil {
					t.Fatalf("%s %d: %v", row, size, err)
				}
				if i == 0 && !region && !bytes.Equal(resp.Outputs[0].Bytes(), x.data) {
					t.Fatalf("%s: the output differs", row)
				}
				resp.Close()
				times = append(times, time.Since(t0))
			}
			add(row, size, median(times[2:]))
		}
	}

	// kserve's ModelServer, and its own and Triton's clients against it.
	kaddr := startKserve(t, py, 512<<20)
	kc := dial(t, kaddr, ClientOptions{MaxMessageBytes: 512 << 20})
	goClient("Go client → kserve server", kc, "echo", "x", false)
	python("kserve client → kserve server", "kserve", kaddr, "echo", "x")
	python("tritonclient → kserve server", "triton", kaddr, "echo", "x")

	// Our server.
	_, addr := serve(t, Options{MaxMessageBytes: 512 << 20}, echoModel("echo_FP32", TensorMetadata{Name: "x_FP32", Datatype: "FP32"}))
	python("kserve client → Go server", "kserve", addr, "echo_FP32", "x_FP32")
	python("tritonclient → Go server", "triton", addr, "echo_FP32", "x_FP32")
	c := dial(t, addr, ClientOptions{MaxMessageBytes: 512 << 20})
	goClient("Go client → Go server", c, "echo_FP32", "x_FP32", false)
	goClient("Go client → Go server, shared memory", c, "echo_FP32", "x_FP32", true)

	// The loopback floor: the same bytes there and back over one TCP
	// connection on 127.0.0.1, with no protocol at all (the kernel's
	// copies and TCP alone), which no gRPC call can beat.
	for _, size := range sizes {
		add("TCP echo on 127.0.0.1, no protocol (the floor)", size, tcpEcho(t, size, reps[size]))
	}

	// memcpy of the same bytes (both ways, as each call moves the tensor
	// there and back).
	for _, size := range sizes {
		src, dst := dlpack.AlignedSlice[byte](size), dlpack.AlignedSlice[byte](size)
		copy(dst, src)
		// Timed over enough copies to be above the clock's resolution.
		loops := max(1, (64<<20)/size)
		var times []time.Duration
		for range reps[size] + 2 {
			t0 := time.Now()
			for range loops {
				copy(dst, src)
				copy(src, dst)
			}
			times = append(times, time.Since(t0)/time.Duration(loops))
		}
		add("memcpy (there and back)", size, median(times[2:]))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| FP32 tensor there and back, median of single calls | 4 KiB | 1 MiB | 64 MiB |\n|---|---|---|---|\n")
	for _, row := range order {
		fmt.Fprintf(&b, "| %s |", row)
		for _, s := range sizes {
			d := rows[row][s]
			r := d.Round(time.Microsecond)
			if d < 10*time.Microsecond {
				r = d.Round(time.Nanosecond)
			}
			fmt.Fprintf(&b, " %v (%.0f MB/s) |", r, 2*float64(s)/d.Seconds()/1e6)
		}
		b.WriteString("\n")
	}
	ratio := func(a, bRow string, s int) float64 { return float64(rows[bRow][s]) / float64(rows[a][s]) }
	best := func(s int) string {
		if rows["kserve client → kserve server"][s] < rows["tritonclient → kserve server"][s] {
			return "kserve client → kserve server"
		}
		return "tritonclient → kserve server"
	}
	fmt.Fprintf(&b, "\nGo → Go against the best Python → Python pair: %.1f× at 1 MiB, %.1f× at 64 MiB (goal ≥ 10×).\n",
		ratio("Go client → Go server", best(1<<20), 1<<20), ratio("Go client → Go server", best(64<<20), 64<<20))
	fmt.Fprintf(&b, "Go → Go against the TCP floor: %.1f× the floor's time at 1 MiB, %.1f× at 64 MiB; 10× the best Python pair would be %.1f× the floor at 1 MiB.\n",
		ratio("TCP echo on 127.0.0.1, no protocol (the floor)", "Go client → Go server", 1<<20), ratio("TCP echo on 127.0.0.1, no protocol (the floor)", "Go client → Go server", 64<<20),
		ratio("TCP echo on 127.0.0.1, no protocol (the floor)", best(1<<20), 1<<20)/10)
	fmt.Fprintf(&b, "tritonclient against the Go server and against kserve's: %.1f× at 1 MiB, %.1f× at 64 MiB (goal ≥ 2×).\n",
		ratio("tritonclient → Go server", "tritonclient → kserve server", 1<<20), ratio("tritonclient → Go server", "tritonclient → kserve server", 64<<20))
	fmt.Fprintf(&b, "Go → Go over shared memory against memcpy at 64 MiB: %.1f× the time (goal ≤ 2×).\n",
		float64(rows["Go client → Go server, shared memory"][64<<20])/float64(rows["memcpy (there and back)"][64<<20]))
	t.Log(b.String())
	fmt.Println(b.String())
}

// tcpEcho is the median time to send size bytes to an echo goroutine
// over a loopback TCP connection and read them back, the same buffer
// sizes each way as a call moves.
func tcpEcho(t *testing.T, size, reps int) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				done <- nil // the client hung up
				return
			}
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	var times []time.Duration
	for range reps + 2 {
		t0 := time.Now()
		sent := make(chan error, 1)
		go func() { _, err := c.Write(src); sent <- err }()
		if _, err := io.ReadFull(c, dst); err != nil {
			t.Fatal(err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("the TCP echo changed the bytes")
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return median(times[2:])
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// shmRequest registers two regions in /dev/shm (files tensorfile
// creates) for an input and an output of size bytes and returns a request
// that names them.
func shmRequest(t *testing.T, c *Client, model, input string, size int) *InferRequest {
	inKey, inOff, inData, inT := shmNPY(t, dlpack.Float32, int64(size/4))
	outKey, outOff, outData, _ := shmNPY(t, dlpack.Float32, int64(size/4))
	ctx := ctxT(t)
	in, out := fmt.Sprint("in", size), fmt.Sprint("out", size)
	if err := c.RegisterSystemSharedMemory(ctx, in, inKey, inOff, uint64(len(inData))); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterSystemSharedMemory(ctx, out, outKey, outOff, uint64(len(outData))); err != nil {
		t.Fatal(err)
	}
	return &InferRequest{Model: model, Inputs: []Input{{Name: input, Tensor: inT, Region: in}},
		Outputs: []RequestedOutput{{Name: input, Region: out, Memory: outData}}}
}
