package dlpack

import (
	"strconv"
	"strings"
	"structs"
)

// DeviceType mirrors DLDeviceType. It is a plain integer: a newer producer
// may send a type this package does not know, which IsKnown reports and
// validation rejects.
type DeviceType int32

// The device types of DLPack 1.3, and those the specification's main
// branch has added since (TPU, TPUHost, Ascend).
const (
	CPU         DeviceType = 1
	CUDA        DeviceType = 2
	CUDAHost    DeviceType = 3
	OpenCL      DeviceType = 4
	Vulkan      DeviceType = 7
	Metal       DeviceType = 8
	VPI         DeviceType = 9
	ROCM        DeviceType = 10
	ROCMHost    DeviceType = 11
	ExtDev      DeviceType = 12
	CUDAManaged DeviceType = 13
	OneAPI      DeviceType = 14
	WebGPU      DeviceType = 15
	Hexagon     DeviceType = 16
	MAIA        DeviceType = 17
	Trn         DeviceType = 18
	TPU         DeviceType = 19 // Google TPU device memory
	TPUHost     DeviceType = 20 // pinned host memory of a TPU runtime (JAX's "pinned_host")
	Ascend      DeviceType = 21 // Huawei Ascend NPU device memory
)

var deviceNames = [...]string{
	CPU: "cpu", CUDA: "cuda", CUDAHost: "cuda_host", OpenCL: "opencl",
	Vulkan: "vulkan", Metal: "metal", VPI: "vpi", ROCM: "rocm",
	ROCMHost: "rocm_host", ExtDev: "ext_dev", CUDAManaged: "cuda_managed",
	OneAPI: "oneapi", WebGPU: "webgpu", Hexagon: "hexagon", MAIA: "maia",
	Trn: "trn", TPU: "tpu", TPUHost: "tpu_host", Ascend: "ascend",
}

// IsKnown reports whether t is one of the device types above: 1 to 21,
// 5 and 6 being unassigned.
func (t DeviceType) IsKnown() bool {
	return t > 0 && int(t) < len(deviceNames) && deviceNames[t] != ""
}

// String returns the type's name ("cpu", "cuda_host"), or "device(N)".
func (t DeviceType) String() string {
	if t.IsKnown() {
		return deviceNames[t]
	}
	return "device(" + strconv.Itoa(int(t)) + ")"
}

// HostAccessible reports whether the CPU can read memory of this type
// directly: CPU, the pinned host memory of CUDA, ROCm and TPU runtimes
// (CUDAHost, ROCMHost, TPUHost: ordinary host pages the runtime has
// pinned for fast transfers), and CUDA managed memory. Device memory
// (CUDA, ROCM, TPU, Ascend, ...) is not; neither are OneAPI allocations,
// whose kind only the oneAPI runtime can tell.
func (t DeviceType) HostAccessible() bool {
	return t == CPU || t == CUDAHost || t == ROCMHost || t == CUDAManaged || t == TPUHost
}

// Device mirrors DLDevice: a device type and its index.
type Device struct {
	_ structs.HostLayout

	Type DeviceType
	ID   int32
}

// CPUDevice is the host CPU, the device of every Go-memory export.
var CPUDevice = Device{Type: CPU}

// String returns "cpu" or "cuda:1": the type's name, and ":id" when the id
// is not 0.
func (d Device) String() string {
	if d.ID == 0 {
		return d.Type.String()
	}
	return d.Type.String() + ":" + strconv.Itoa(int(d.ID))
}

// ParseDevice parses the strings String returns: "cpu", "cuda", "cuda:1",
// "device(42):3". It checks the syntax only; use Validate for the rules.
func ParseDevice(s string) (Device, error) {
	name, id := s, int64(0)
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		n, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return Device{}, fieldErr(ErrDevice, "device", strconv.Quote(s), "device id must be an int32")
		}
		name, id = s[:i], n
	}
	if rest, ok := strings.CutPrefix(name, "device("); ok && strings.HasSuffix(rest, ")") {
		n, err := strconv.ParseInt(strings.TrimSuffix(rest, ")"), 10, 32)
		if err == nil {
			return Device{Type: DeviceType(n), ID: int32(id)}, nil
		}
	}
	for t, n := range deviceNames {
		if n != "" && n == name {
			return Device{Type: DeviceType(t), ID: int32(id)}, nil
		}
	}
	return Device{}, fieldErr(ErrDevice, "device", strconv.Quote(s), "unknown device name")
}

// Validate checks that the device type is known and the id not negative.
func (d Device) Validate() error {
	if !d.Type.IsKnown() {
		return fieldErr(ErrDevice, "device.device_type", int(d.Type), "unknown device type")
	}
	if d.ID < 0 {
		return fieldErr(ErrDevice, "device.device_id", int(d.ID), "negative device id")
	}
	return nil
}
