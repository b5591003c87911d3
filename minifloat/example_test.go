package minifloat_test

import (
	"fmt"

	"github.com/godlpack/dlpack/minifloat"
)

func ExampleBFloat16From32() {
	b := minifloat.BFloat16From32(3.14159)
	fmt.Printf("%#04x %v\n", uint16(b), b.Float32())
	// Output: 0x4049 3.140625
}

func ExampleFloat16From32() {
	for _, x := range []float32{1, 65504, 65520, 1e-8} {
		h := minifloat.Float16From32(x)
		fmt.Printf("%v -> %#04x -> %v\n", x, uint16(h), h.Float32())
	}
	// Output:
	// 1 -> 0x3c00 -> 1
	// 65504 -> 0x7bff -> 65504
	// 65520 -> 0x7c00 -> +Inf
	// 1e-08 -> 0x0000 -> 0
}

// E4M3FN has no infinities: beyond its range lies NaN.
func ExampleE4M3FNFrom32() {
	for _, x := range []float32{0.3, 448, 500} {
		v := minifloat.E4M3FNFrom32(x)
		fmt.Println(x, v.Float32(), v.IsNaN())
	}
	// Output:
	// 0.3 0.3125 false
	// 448 448 false
	// 500 NaN true
}

func ExampleE5M2From32() {
	v := minifloat.E5M2From32(100000)
	fmt.Println(v.Float32())
	// Output: +Inf
}
