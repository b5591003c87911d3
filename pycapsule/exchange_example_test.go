//go:build cgo

package pycapsule_test

import (
	"sync"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/pycapsule"
)

// A Go extension's tensor type as a DLPack 1.3 producer in the C exchange
// API. Its Python instances carry the id of a Go tensor in _id; factory is
// a Python function id -> instance. After Publish, the class carries
// __dlpack_c_exchange_api__ and consumers such as tvm_ffi.from_dlpack call
// the table instead of __dlpack__.
func ExamplePublish() {
	var (
		mu      sync.Mutex
		tensors = map[int64]dlpack.Producer{}
		factory uintptr // a borrowed reference the Python module keeps
	)
	tensorType := pycapsule.TensorType{
		Producer: func(obj uintptr) (dlpack.Producer, error) {
			id, err := pycapsule.IntAttr(obj, "_id")
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			return tensors[id], nil // nil: the table answers BufferError
		},
		New: func(f dlpack.Foreign) (uintptr, error) {
			mu.Lock()
			id := int64(len(tensors) + 1)
			tensors[id] = f
			mu.Unlock()
			return pycapsule.CallInt(factory, id)
		},
	}

	// //export publish: called once from Python with the class and the factory.
	publish := func(class, fromID uintptr) int {
		factory = fromID
		if _, err := pycapsule.Publish(class, tensorType); err != nil {
			pycapsule.Raise(err)
			return -1
		}
		return 0
	}
	_ = publish
}
