package nilcheck

import (
	"fmt"
	"testing"
)

// ptrShaped is pointer-shaped: an interface holds its value directly, so
// its zero value's data word is nil, as a nil pointer's is.
type ptrShaped struct{ p *int }

func (s ptrShaped) M() int { return len(fmt.Sprint(s.p)) }

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
