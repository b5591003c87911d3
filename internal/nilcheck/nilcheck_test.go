package nilcheck

import "testing"

type ptrShaped struct{ p *int }

func (ptrShaped) M() {}

func TestIsNil(t *testing.T) {
	var nilInt *int
	var nilMap map[string]int
	var nilFunc func()
	x := 3
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil interface", nil, true},
		{"typed nil pointer", nilInt, true},
		{"pointer", &x, false},
		{"int", 0, false},
		{"zero-size value", struct{}{}, false},
		{"nil map", nilMap, false},
		{"nil func", nilFunc, false},
		{"pointer-shaped struct holding nil", ptrShaped{}, false},
		{"zero array of pointers", [1]*int{}, false},
	} {
		if got := IsNil(c.v); got != c.want {
			t.Errorf("%s: IsNil = %v, want %v", c.name, got, c.want)
		}
	}
}
