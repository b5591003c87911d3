//go:build !unix

package dlarrow

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
)

// File is an Arrow IPC file read through a memory map (unix only).
type File struct{}

var errNoMmap = errors.New("dlarrow: memory-mapped files need a unix system")

// OpenFile fails: memory maps are implemented for unix systems.
func OpenFile(path string) (*File, error) { return nil, errNoMmap }

// Schema is nil.
func (f *File) Schema() *arrow.Schema { return nil }

// NumRecordBatches is 0.
func (f *File) NumRecordBatches() int { return 0 }

// Column fails.
func (f *File) Column(batch, col int) (*Tensor, error) { return nil, errNoMmap }

// Close does nothing.
func (f *File) Close() error { return nil }
