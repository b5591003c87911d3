// Command oipcompare is the Open Inference Protocol's table of make
// compare-oip: one FP32 tensor to an echo model and back at 4 KiB, 1 MiB
// and 64 MiB, the median of single calls on a warm connection, for each
// pair of client and server (dloip, kserve's ModelServer, kserve's and
// tritonclient's clients), beside a TCP echo with no protocol and memcpy
// of the same bytes; then the verdicts against the goals, as Markdown.
//
//	go run ./bench/oipcompare -python .venv-oip/bin/python
//
// It runs from the repository's root (the peers' scripts are
// dloip/testdata's) and needs the venv make oip installs.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
)

var (
	python  = flag.String("python", os.Getenv("DLOIP_PYTHON"), "the Python of the venv with kserve and tritonclient")
	scripts = flag.String("scripts", "dloip/testdata", "the folder of the peers' scripts")
	tables  = flag.String("tables", "grpc,rest,stream", "the tables to make, of grpc, rest and stream")
)

var sizes = []int{4 << 10, 1 << 20, 64 << 20}

// reps is the number of timed calls at each size (two more go first,
// untimed).
var reps = map[int]int{4 << 10: 200, 1 << 20: 200, 64 << 20: 10}

const (
	floorRow  = "TCP echo on 127.0.0.1, no protocol (the floor)"
	memcpyRow = "memcpy (there and back)"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("oipcompare: ")
	flag.Parse()
	if *python == "" {
		log.Fatal("no Python: give -python or set DLOIP_PYTHON (make compare-oip does)")
	}
	on := map[string]bool{}
	for _, name := range strings.Split(*tables, ",") {
		if name != "grpc" && name != "rest" && name != "stream" {
			log.Fatalf("-tables: no table %q (grpc, rest, stream)", name)
		}
		on[name] = true
	}
	var t table
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	fail := func(err error) {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
		log.Fatal(err)
	}

	// kserve's ModelServer, and its own and Triton's clients against it.
	var kaddr, kbase string
	if on["grpc"] || on["rest"] {
		var stopK func()
		var err error
		kaddr, kbase, stopK, err = startKserve(512 << 20)
		if err != nil {
			fail(err)
		}
		cleanup = append(cleanup, stopK)
	}
	if on["grpc"] {
		kc, err := dloip.Dial(kaddr, dloip.ClientOptions{MaxMessageBytes: 512 << 20})
		if err != nil {
			fail(err)
		}
		cleanup = append(cleanup, func() { kc.Close() })
		for _, step := range []func() error{
			func() error { return goClient(&t, "Go client → kserve server", kc, "echo", "x", nil) },
			func() error {
				return peer(&t, "kserve client → kserve server", "kserve", kaddr, "echo", "x", plan(sizes)...)
			},
			func() error {
				return peer(&t, "tritonclient → kserve server", "triton", kaddr, "echo", "x", plan(sizes)...)
			},
		} {
			if err := step(); err != nil {
				fail(err)
			}
		}
	}

	// Our server.
	s := dloip.NewServer(dloip.Options{MaxMessageBytes: 512 << 20})
	x := dloip.TensorMetadata{Name: "x_FP32", Datatype: "FP32", Shape: []int64{-1}}
	if err := s.Register(dloip.ModelFunc(dloip.ModelMetadata{Name: "echo_FP32", Inputs: []dloip.TensorMetadata{x}, Outputs: []dloip.TensorMetadata{x}}, echo)); err != nil {
		fail(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	go s.Serve(lis)
	cleanup = append(cleanup, s.Shutdown)
	addr := lis.Addr().String()
	c, err := dloip.Dial(addr, dloip.ClientOptions{MaxMessageBytes: 512 << 20})
	if err != nil {
		fail(err)
	}
	cleanup = append(cleanup, func() { c.Close() })
	if on["grpc"] {
		if err := peer(&t, "kserve client → Go server", "kserve", addr, "echo_FP32", "x_FP32", plan(sizes)...); err != nil {
			fail(err)
		}
		// One size at a time, counting this process's CPU time (user and
		// system) meanwhile: the Go server is all this process does while
		// tritonclient calls it, so that is the server's whole share of each
		// call, an upper bound on what any change to the server could save.
		serverUser, serverSys := map[int]time.Duration{}, map[int]time.Duration{}
		for _, size := range sizes {
			u0, s0 := processCPU()
			if err := peer(&t, "tritonclient → Go server", "triton", addr, "echo_FP32", "x_FP32", plan([]int{size})...); err != nil {
				fail(err)
			}
			u1, s1 := processCPU()
			calls := time.Duration(reps[size] + 2)
			serverUser[size], serverSys[size] = (u1-u0)/calls, (s1-s0)/calls
		}
		// tritonclient's own work for one call, with no network: copying the
		// array in, building the request, serializing it, parsing a response
		// and as_numpy.
		clientParts, err := tritonParts(addr)
		if err != nil {
			fail(err)
		}

		if err := goClient(&t, "Go client → Go server", c, "echo_FP32", "x_FP32", nil); err != nil {
			fail(err)
		}
		regions, err := newRegions(c)
		if err != nil {
			fail(err)
		}
		cleanup = append(cleanup, regions.close)
		if err := goClient(&t, "Go client → Go server, shared memory", c, "echo_FP32", "x_FP32", regions); err != nil {
			fail(err)
		}

		// The loopback floor: the same bytes there and back over one TCP
		// connection on 127.0.0.1, with no protocol at all (the kernel's
		// copies and TCP alone), which no gRPC call can beat.
		for _, size := range sizes {
			d, err := tcpEcho(size, reps[size])
			if err != nil {
				fail(err)
			}
			t.add(floorRow, size, d)
		}
		// memcpy of the same bytes (both ways, as each call moves the tensor
		// there and back), timed over enough copies to be above the clock's
		// resolution.
		for _, size := range sizes {
			src, dst := dlpack.AlignedSlice[byte](size), dlpack.AlignedSlice[byte](size)
			copy(dst, src)
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
			t.add(memcpyRow, size, median(times[2:]))
		}

		var b strings.Builder
		t.write(&b, "FP32 tensor there and back, median of single calls")
		ratio := func(a, bRow string, s int) float64 { return float64(t.rows[bRow][s]) / float64(t.rows[a][s]) }
		best := func(s int) string {
			if t.rows["kserve client → kserve server"][s] < t.rows["tritonclient → kserve server"][s] {
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
		bound := func(s int, saved time.Duration) float64 {
			return float64(t.rows["tritonclient → kserve server"][s]) / float64(t.rows["tritonclient → Go server"][s]-saved)
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
			us(clientParts[1<<20][0]+t.rows[floorRow][1<<20]), us(clientParts[64<<20][0]+t.rows[floorRow][64<<20]),
			float64(t.rows["tritonclient → kserve server"][1<<20])/float64(clientParts[1<<20][0]+t.rows[floorRow][1<<20]),
			float64(t.rows["tritonclient → kserve server"][64<<20])/float64(clientParts[64<<20][0]+t.rows[floorRow][64<<20]))
		fmt.Fprintf(&b, "Go → Go over shared memory against memcpy at 64 MiB: %.1f× the time (goal ≤ 2×).\n",
			float64(t.rows["Go client → Go server, shared memory"][64<<20])/float64(t.rows[memcpyRow][64<<20]))
		fmt.Print(b.String())
	}

	if on["rest"] {
		if err := compareREST(s, c, kbase); err != nil {
			fail(err)
		}
	}
	if on["stream"] {
		if err := compareStream(); err != nil {
			fail(err)
		}
	}
}

// table is rows of medians by size, in the order rows were first added.
type table struct {
	rows  map[string]map[int]time.Duration
	order []string
}

func (t *table) add(row string, size int, d time.Duration) {
	if t.rows == nil {
		t.rows = map[string]map[int]time.Duration{}
	}
	if t.rows[row] == nil {
		t.rows[row] = map[int]time.Duration{}
		t.order = append(t.order, row)
	}
	t.rows[row][size] = d
}

// write writes the table in Markdown, each cell a time and the MB/s of
// the bytes there and back.
func (t *table) write(b *strings.Builder, title string) {
	fmt.Fprintf(b, "\n| %s | 4 KiB | 1 MiB | 64 MiB |\n|---|---|---|---|\n", title)
	for _, row := range t.order {
		fmt.Fprintf(b, "| %s |", row)
		for _, s := range sizes {
			d := t.rows[row][s]
			r := d.Round(time.Microsecond)
			if d < 10*time.Microsecond {
				r = d.Round(time.Nanosecond)
			}
			fmt.Fprintf(b, " %v (%.0f MB/s) |", r, 2*float64(s)/d.Seconds()/1e6)
		}
		b.WriteString("\n")
	}
}

// plan is the size:calls arguments of the peers' scripts.
func plan(ss []int) []string {
	var p []string
	for _, s := range ss {
		p = append(p, fmt.Sprintf("%d:%d", s, reps[s]))
	}
	return p
}

// peer runs a Python client (bench_clients.py) and adds its medians as
// row.
func peer(t *table, row, client, addr, model, input string, plan ...string) error {
	cmd := exec.Command(*python, append([]string{"bench_clients.py", client, addr, model, input}, plan...)...)
	cmd.Dir = *scripts
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", row, err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		size, err1 := strconv.Atoi(f[0])
		sec, err2 := strconv.ParseFloat(f[1], 64)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s: %q: %v", row, line, err)
		}
		t.add(row, size, time.Duration(sec*float64(time.Second)))
	}
	return nil
}

// tritonParts is tritonclient's own work for one call at each size, with
// no network: the whole, then copying the array in, building the
// request, serializing it, parsing a response and as_numpy.
func tritonParts(addr string) (map[int][]time.Duration, error) {
	cmd := exec.Command(*python, append([]string{"bench_clients.py", "triton-parts", addr, "echo_FP32", "x_FP32"}, plan(sizes)...)...)
	cmd.Dir = *scripts
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tritonclient's own work: %v\n%s", err, out)
	}
	parts := map[int][]time.Duration{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 7 {
			return nil, fmt.Errorf("tritonclient's own work: %q", line)
		}
		size, _ := strconv.Atoi(f[0])
		for _, x := range f[1:] {
			sec, _ := strconv.ParseFloat(x, 64)
			parts[size] = append(parts[size], time.Duration(sec*float64(time.Second)))
		}
	}
	return parts, nil
}

// echo answers each input as an output of the same name.
func echo(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
	outs := make([]dloip.Output, len(req.Inputs))
	for i, in := range req.Inputs {
		outs[i] = dloip.Output{Name: in.Name(), Tensor: in}
	}
	return outs, nil
}

// goClient adds the medians of c's calls at every size as row: a fresh
// tensor sent, or with rs, an input and an output in registered shared
// memory.
func goClient(t *table, row string, c *dloip.Client, model, input string, rs *regions) error {
	for _, size := range sizes {
		data := make([]float32, size/4)
		for i := range data {
			data[i] = float32(i)
		}
		req := &dloip.InferRequest{Model: model, Inputs: []dloip.Input{{Name: input, Tensor: dlpack.NewArray(data, []int64{int64(len(data))})}}}
		var want []byte
		if rs != nil {
			var err error
			if req, want, err = rs.request(model, input, size); err != nil {
				return err
			}
		}
		var times []time.Duration
		for i := range reps[size] + 2 {
			t0 := time.Now()
			resp, err := c.Infer(context.Background(), req)
			if err != nil {
				return fmt.Errorf("%s %d: %v", row, size, err)
			}
			if i == 0 {
				got := resp.Output(input).Bytes()
				if rs != nil {
					got = req.Outputs[0].Memory
				} else {
					want = float32Bytes(data)
				}
				if !bytes.Equal(got, want) {
					resp.Close()
					return fmt.Errorf("%s %d: the output differs from the input", row, size)
				}
			}
			resp.Close()
			times = append(times, time.Since(t0))
		}
		t.add(row, size, median(times[2:]))
	}
	return nil
}

// float32Bytes is the wire form of f: little-endian, as the tensor's
// memory is on every platform this runs on.
func float32Bytes(f []float32) []byte {
	b := make([]byte, 0, 4*len(f))
	for _, x := range f {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// regions is one shared-memory region per size, registered with the
// server: an input at its start and the output after it.
type regions struct {
	c  *dloip.Client
	rs []*dloip.Region
}

func newRegions(c *dloip.Client) (*regions, error) { return &regions{c: c}, nil }

func (r *regions) request(model, input string, size int) (*dloip.InferRequest, []byte, error) {
	name := fmt.Sprintf("oipcompare-%d-%d", os.Getpid(), size)
	reg, err := dloip.CreateRegion(name, int64(2*size))
	if err != nil {
		return nil, nil, err
	}
	r.rs = append(r.rs, reg)
	x, err := reg.Tensor(0, dlpack.Float32, []int64{int64(size / 4)})
	if err != nil {
		return nil, nil, err
	}
	in := reg.Bytes()[:size]
	for i := range in {
		in[i] = byte(i * 7)
	}
	if err := r.c.RegisterRegion(context.Background(), name, reg); err != nil {
		return nil, nil, err
	}
	return &dloip.InferRequest{Model: model,
		Inputs:  []dloip.Input{{Name: input, Tensor: x}},
		Outputs: []dloip.RequestedOutput{{Name: input, Region: name, Offset: uint64(size), Memory: reg.Bytes()[size:]}}}, slices.Clone(in), nil
}

func (r *regions) close() {
	for _, reg := range r.rs {
		r.c.UnregisterRegion(context.Background(), reg.Key())
		reg.Close()
	}
}

// startKserve starts kserve_server.py (message limit limit) on loopback
// ports and waits until its model "echo" is ready; it returns the gRPC
// address and the REST base URL.
func startKserve(limit int) (string, string, func(), error) {
	grpcPort, httpPort, err := freePort(), freePort(), error(nil)
	cmd := exec.Command(*python, "kserve_server.py", "--grpc_port", fmt.Sprint(grpcPort), "--http_port", fmt.Sprint(httpPort),
		"--grpc_max_send_message_length", fmt.Sprint(limit), "--grpc_max_receive_message_length", fmt.Sprint(limit))
	cmd.Dir = *scripts
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err = cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	addr, base := fmt.Sprintf("127.0.0.1:%d", grpcPort), fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	c, err := dloip.Dial(addr, dloip.ClientOptions{})
	if err != nil {
		stop()
		return "", "", nil, err
	}
	defer c.Close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, _ := c.ModelReady(ctx, "echo", "")
		cancel()
		if ok {
			return addr, base, stop, nil
		}
		if i == 600 {
			stop()
			return "", "", nil, fmt.Errorf("kserve did not become ready in 60 s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort() int {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// tcpEcho is the median time to send size bytes to an echo goroutine
// over a loopback TCP connection and read them back.
func tcpEcho(size, reps int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
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
		return 0, err
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
			return 0, err
		}
		if err := <-sent; err != nil {
			return 0, err
		}
		times = append(times, time.Since(t0))
	}
	if !bytes.Equal(src, dst) {
		return 0, errors.New("the TCP echo changed the bytes")
	}
	c.Close()
	if err := <-done; err != nil {
		return 0, err
	}
	return median(times[2:]), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// processCPU is the CPU time this process has used, in user space and in
// the kernel.
func processCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
