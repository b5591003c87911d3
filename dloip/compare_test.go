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
	"syscall"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
)

// TestCompare is the throughput table of make compare (DLOIP_COMPARE
// set, with DLOIP_PYTHON): one FP32 tensor to an echo model and back, at
// 4 KiB, 1 MiB and 64 MiB, the median of single calls on a warm
// connection, for each pair of client and server, beside memcpy of the
// same bytes. Printed as a Markdown table; plain go test skips it.
// floorRow is TestCompare's row of a TCP echo with no protocol.
const floorRow = "TCP echo on 127.0.0.1, no protocol (the floor)"

func TestCompare(t *testing.T) {
	if os.Getenv("DLOIP_COMPARE") == "" {
		t.Skip("DLOIP_COMPARE is not set (make compare sets it)")
	}
	py := peerPython(t)
	sizes := []int{4 << 10, 1 << 20, 64 << 20}
	reps := map[int]int{4 << 10: 200, 1 << 20: 200, 64 << 20: 10}
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
	python := func(row, peer, addr, model, input string, plan ...string) {
		out, err := exec.Command(py, append([]string{"testdata/bench_clients.py", peer, addr, model, input}, plan...)...).CombinedOutput()
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
	python("kserve client → kserve server", "kserve", kaddr, "echo", "x", plan()...)
	python("tritonclient → kserve server", "triton", kaddr, "echo", "x", plan()...)

	// Our server.
	_, addr := serve(t, Options{MaxMessageBytes: 512 << 20}, echoModel("echo_FP32", TensorMetadata{Name: "x_FP32", Datatype: "FP32", Shape: []int64{-1}}))
	python("kserve client → Go server", "kserve", addr, "echo_FP32", "x_FP32", plan()...)
	// One size at a time, counting this process's CPU time (user and
	// system) meanwhile: the Go server is all this process does while
	// tritonclient calls it, so that is the server's whole share of each
	// call, an upper bound on what any change to the server could save.
	serverUser, serverSys := map[int]time.Duration{}, map[int]time.Duration{}
	for _, size := range sizes {
		u0, s0 := processCPU(t)
		python("tritonclient → Go server", "triton", addr, "echo_FP32", "x_FP32", fmt.Sprintf("%d:%d", size, reps[size]))
		u1, s1 := processCPU(t)
		calls := time.Duration(reps[size] + 2)
		serverUser[size], serverSys[size] = (u1-u0)/calls, (s1-s0)/calls
	}
	// tritonclient's own work for one call, with no network: copying the
	// array in, building the request, serializing it, parsing a response
	// and as_numpy.
	clientParts := map[int][]time.Duration{}
	out, err := exec.Command(py, append([]string{"testdata/bench_clients.py", "triton-parts", addr, "echo_FP32", "x_FP32"}, plan()...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tritonclient's own work: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 7 {
			t.Fatalf("tritonclient's own work: %q", line)
		}
		size, _ := strconv.Atoi(f[0])
		for _, x := range f[1:] {
			sec, _ := strconv.ParseFloat(x, 64)
			clientParts[size] = append(clientParts[size], time.Duration(sec*float64(time.Second)))
		}
	}

	c := dial(t, addr, ClientOptions{MaxMessageBytes: 512 << 20})
	goClient("Go client → Go server", c, "echo_FP32", "x_FP32", false)
	goClient("Go client → Go server, shared memory", c, "echo_FP32", "x_FP32", true)

	// The loopback floor: the same bytes there and back over one TCP
	// connection on 127.0.0.1, with no protocol at all (the kernel's
	// copies and TCP alone), which no gRPC call can beat.
	for _, size := range sizes {
		add(floorRow, size, tcpEcho(t, size, reps[size]))
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
		ratio(floorRow, "Go client → Go server", 1<<20), ratio(floorRow, "Go client → Go server", 64<<20),
		ratio(floorRow, best(1<<20), 1<<20)/10)
	fmt.Fprintf(&b, "tritonclient against the Go server and against kserve's: %.1f× at 1 MiB, %.1f× at 64 MiB (goal ≥ 2×).\n",
		ratio("tritonclient → Go server", "tritonclient → kserve server", 1<<20), ratio("tritonclient → Go server", "tritonclient → kserve server", 64<<20))
	// were the server's user time, or all its time, nothing
	bound := func(s int, saved time.Duration) float64 {
		return float64(rows["tritonclient → kserve server"][s]) / float64(rows["tritonclient → Go server"][s]-saved)
	}
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	fmt.Fprintf(&b, "The Go server's own CPU time per tritonclient call: %v in user space and %v in the kernel at 1 MiB, %v and %v at 64 MiB.\n",
		us(serverUser[1<<20]), us(serverSys[1<<20]), us(serverUser[64<<20]), us(serverSys[64<<20]))
	fmt.Fprintf(&b, "Were its user-space time nothing (a server whose only cost is the kernel's socket work), tritonclient would be at most %.1f× as fast against it at 1 MiB and %.1f× at 64 MiB; were all its time nothing, %.1f× and %.1f×.\n",
		bound(1<<20, serverUser[1<<20]), bound(64<<20, serverUser[64<<20]),
		bound(1<<20, serverUser[1<<20]+serverSys[1<<20]), bound(64<<20, serverUser[64<<20]+serverSys[64<<20]))
	for _, s := range []int{1 << 20, 64 << 20} {
		p := clientParts[s]
		fmt.Fprintf(&b, "tritonclient's own work per call at %d MiB, with no network: %v (copying the array in %v, building the request %v, serializing it %v, parsing the response %v, as_numpy %v).\n",
			s>>20, us(p[0]), us(p[1]), us(p[2]), us(p[3]), us(p[4]), us(p[5]))
	}
	fmt.Fprintf(&b, "tritonclient's own work plus the TCP floor, what any server over TCP leaves it: %v at 1 MiB, %v at 64 MiB; against kserve's server that is at most %.1f× and %.1f× (goal ≥ 2×).\n",
		us(clientParts[1<<20][0]+rows[floorRow][1<<20]), us(clientParts[64<<20][0]+rows[floorRow][64<<20]),
		float64(rows["tritonclient → kserve server"][1<<20])/float64(clientParts[1<<20][0]+rows[floorRow][1<<20]),
		float64(rows["tritonclient → kserve server"][64<<20])/float64(clientParts[64<<20][0]+rows[floorRow][64<<20]))
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

// processCPU is the CPU time this process has used, in user space and in
// the kernel.
func processCPU(t *testing.T) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
