package dlflight

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlgrpc"
)

// python is the interpreter with pyarrow.flight and NumPy
// ($DLFLIGHT_PYTHON; `make flight` sets it to the pinned venv's).
func python(t *testing.T) string {
	py := os.Getenv("DLFLIGHT_PYTHON")
	if py == "" {
		t.Skip("DLFLIGHT_PYTHON is not set (make flight sets it)")
	}
	return py
}

type manifestEntry struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

func (p pki) write(t *testing.T, dir string) {
	for name, b := range map[string][]byte{"ca.pem": p.caPEM, "cert.pem": p.certPEM, "key.pem": p.keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPeersPyarrowClient: a pyarrow.flight client fetches every element
// type from the Go server over TLS with a token, bit for bit through
// to_numpy_ndarray and np.from_dlpack, meets the refusals, and puts the
// tensors back; Go then reads them bit for bit.
func TestPeersPyarrowClient(t *testing.T) {
	py := python(t)
	p := newPKI(t)
	dir := t.TempDir()
	p.write(t, dir)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, addr := serve(t, Options{TLS: p.server, Allocator: alloc, EndpointBytes: 200,
		Tokens: map[string]string{"tok-admin": "admin", "tok-reader": "reader"},
		Allow:  func(who string, op dlgrpc.Op, name string) bool { return who == "admin" || name != "secret" }})
	if err := s.Register("secret", newRaw(t, dlpack.Int8, 4)); err != nil {
		t.Fatal(err)
	}
	var manifest []manifestEntry
	srcs := map[string]*rawTensor{}
	for _, dt := range allDTypes {
		for _, shape := range [][]int64{{3, 4, 5}, {7}, {}, {2, 1, 6}} {
			name := fmt.Sprintf("%v-%d", dt, len(manifest))
			src := newRaw(t, dt, shape...)
			if err := s.Register(name, src); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name+".bin"), src.data, 0o600); err != nil {
				t.Fatal(err)
			}
			manifest = append(manifest, manifestEntry{name, dt.String(), append([]int64{}, shape...)})
			srcs[name] = src
		}
	}
	mb, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o600); err != nil {
		t.Fatal(err)
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	out, err := exec.Command(py, "testdata/peer.py", "client", dir, port).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr, ClientOptions{TLS: p.client, Token: "tok-admin"})
	for name, src := range srcs {
		got, err := c.Get(ctxT(t), "py/"+name)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, got, src)
		got.Close()
	}
	t.Logf("Go read back the %d tensors pyarrow put, bit for bit", len(srcs))
	s.Shutdown()
	alloc.AssertSize(t, 0)
}

// TestPeersPyarrowServer: the Go client fetches every element type from a
// pyarrow.flight server (TLS, token), bit for bit, aligned and without a
// copy after the codec's, and puts tensors to it.
func TestPeersPyarrowServer(t *testing.T) {
	py := python(t)
	p := newPKI(t)
	dir := t.TempDir()
	p.write(t, dir)
	cmd := exec.Command(py, "testdata/peer.py", "server", dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the pyarrow server: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(line)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctls := p.client.Clone()
	ctls.ServerName = "localhost"
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	bad := dial(t, addr, ClientOptions{TLS: ctls, Token: "nope"})
	if _, err := bad.List(ctxT(t)); err == nil {
		t.Fatal("the pyarrow server served a wrong token")
	}
	c := dial(t, addr, ClientOptions{TLS: ctls, Token: "tok-admin", Allocator: alloc})
	var manifest []manifestEntry
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &manifest); err != nil {
		t.Fatal(err)
	}
	infos, err := c.List(ctxT(t))
	if err != nil || len(infos) != len(manifest) {
		t.Fatalf("List: %d infos, %v", len(infos), err)
	}
	var bodies [][]byte
	recvHook = func(b []byte) { bodies = append(bodies, b) }
	defer func() { recvHook = nil }()
	for _, m := range manifest {
		want, err := os.ReadFile(filepath.Join(dir, m.Name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		dt, _ := dlpack.ParseDataType(m.DType)
		info, err := c.Info(ctxT(t), m.Name)
		if err != nil || info.DType != dt || fmt.Sprint(info.Shape) != fmt.Sprint(m.Shape) || info.Bytes != int64(len(want)) {
			t.Fatalf("Info %+v (%v), want %+v", info, err, m)
		}
		bodies = bodies[:0]
		got, err := c.Get(ctxT(t), m.Name)
		if err != nil {
			t.Fatal(err)
		}
		src := &rawTensor{dt: dt, shape: m.Shape, data: want}
		sameTensor(t, got, src)
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(bodies[0])))
		if len(bodies) != 1 || got.DataAddr() < lo || got.DataAddr()+uintptr(len(want)) > lo+uintptr(len(bodies[0])) || !got.Aligned() {
			t.Fatalf("%s: at %#x, not aligned inside the received body", m.Name, got.DataAddr())
		}
		// and back to pyarrow, then again from it
		if err := c.Put(ctxT(t), "go/"+m.Name, got); err != nil {
			t.Fatal(err)
		}
		got.Close()
		again, err := c.Get(ctxT(t), "go/"+m.Name)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, again, src)
		again.Close()
	}
	t.Logf("Go client: %d tensors from pyarrow.flight bit for bit, aligned inside the received body; put and fetched back", len(manifest))
	alloc.AssertSize(t, 0)
}
