//go:build cgo

package dlonnx_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlonnx"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ort "github.com/yalue/onnxruntime_go"
)

// releaseSteps are the four things a program does at the end, which
// TestReleaseOrders runs in every order.
var releaseSteps = []string{"destroy", "session", "environment", "consumers"}

func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{append([]string(nil), xs...)}
	}
	var out [][]string
	for i := range xs {
		rest := append(append([]string(nil), xs[:i]...), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{xs[i]}, p...))
		}
	}
	return out
}

const orderDone = "dlonnx release order done"

// Destroying every value, destroying the Session, ort.DestroyEnvironment
// (which unloads onnxruntime_go's handle on the library) and the DLPack
// consumers' releases, in each of the 24 orders, each in a child process
// (the environment cannot come back): none crashes, the consumers read
// the right values whenever they come, and values nobody destroyed are
// released by their cleanups after all of it. The child exits 0 and
// prints its marker only if everything was released.
func TestReleaseOrders(t *testing.T) {
	if order := os.Getenv("DLONNX_RELEASE_ORDER"); order != "" {
		releaseInOrder(t, strings.Split(order, ","))
		return
	}
	models(t)
	for _, order := range permutations(releaseSteps) {
		name := strings.Join(order, ",")
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReleaseOrders$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DLONNX_RELEASE_ORDER="+name)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the child for %s failed:\n%s", name, out)
			assert.Contains(t, string(out), orderDone, "the child ran the order:\n%s", out)
		})
	}
}

// releaseInOrder is the child's side.
func releaseInOrder(t *testing.T, order []string) {
	dir := models(t)
	data, err := os.ReadFile(dir + "/relu_float32.onnx")
	require.NoError(t, err)
	// onnxruntime_go's session: closed before DestroyEnvironment, as
	// onnxruntime_go requires of its own sessions.
	ortSess, err := ort.NewDynamicAdvancedSessionWithONNXData(data, []string{"X"}, []string{"Y"}, nil)
	require.NoError(t, err)
	sess, err := dlonnx.NewSession(data)
	require.NoError(t, err)

	x, err := dlonnx.ToValue(dlpack.NewArray([]float32{-1, 2, -3, 4}, []int64{4})) // Go memory, pinned
	require.NoError(t, err)
	y, err := dlonnx.NewOutput(dlpack.Float32, []int64{4}) // run by onnxruntime_go
	require.NoError(t, err)
	require.NoError(t, ortSess.Run([]ort.Value{x}, []ort.Value{y}))
	outs, err := sess.Run(x) // allocated by ONNX Runtime, adopted
	require.NoError(t, err)
	o := outs[0]
	// Values nobody destroys: their cleanups run at the end, after
	// DestroyEnvironment whatever the order.
	func() {
		lost, err := dlonnx.ToValue(dlpack.NewArray([]float32{1, 2}, []int64{2}))
		require.NoError(t, err)
		lostOuts, err := sess.Run(lost)
		require.NoError(t, err)
		_ = lostOuts
	}()

	fy, err := dlpack.From(y)
	require.NoError(t, err)
	fo, err := dlpack.From(o)
	require.NoError(t, err)
	m, err := dlpack.Produce(o, dlpack.Request{}) // a C consumer
	require.NoError(t, err)

	for i, step := range order {
		switch step {
		case "destroy":
			x.Destroy()
			y.Destroy()
			o.Destroy()
		case "session":
			sess.Destroy()
		case "environment":
			ortSess.Destroy()
			require.NoError(t, ort.DestroyEnvironment())
			// The library stays open for what is left: the values
			// nobody destroyed, and whatever comes after in the order.
			assert.Greater(t, dlonnx.LibRefs(), 0, "after %v", order[:i+1])
		case "consumers":
			for _, f := range []dlpack.Foreign{fy, fo} {
				xs, err := dlpack.Slice[float32](f)
				require.NoError(t, err)
				assert.Equal(t, []float32{0, 2, 0, 4}, xs)
				f.Close()
			}
			assert.Equal(t, 6.0, cshim.SumVersioned(m.Pointer()))
			cshim.ReleaseVersioned(m.Pointer())
		}
	}
	for deadline := time.Now().Add(10 * time.Second); dlonnx.LibRefs() > 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, 0, dlonnx.LibRefs(), "everything released its hold on the library")
	require.Equal(t, int64(0), dlpack.Outstanding())
	if !t.Failed() {
		fmt.Println(orderDone)
	}
}
