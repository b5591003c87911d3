package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMin is the smallest input, in bytes of tensor data, that gets a
// progress bar: smaller files are done before a bar would be read.
var progressMin int64 = 32 << 20

// isTerminal reports whether w is a terminal (tests replace it).
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is a progress bar of the bytes written, on a terminal.
type progress struct {
	bar *progressbar.ProgressBar
	out io.Writer
}

// newProgress returns a bar for total bytes on stderr, or nil when the bar
// is off, stderr is not a terminal, or the input is small. A nil
// *progress does nothing.
func newProgress(total int64, on bool, stderr io.Writer) *progress {
	if !on || total < progressMin || !isTerminal(stderr) {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("converting"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)
	return &progress{bar: bar, out: stderr}
}

// writer counts what passes to w, in chunks so that one large tensor
// moves the bar smoothly. The bar counts tensor data; headers and
// padding add a little, so it is clamped at the total.
func (p *progress) writer(w io.Writer) io.Writer { return &counting{w: w, p: p} }

func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
	}
}

func (p *progress) abort() {
	if p != nil {
		_ = p.bar.Exit()
		_, _ = io.WriteString(p.out, "\n")
	}
}

type counting struct {
	w io.Writer
	p *progress
}

const progressChunk = 4 << 20

func (c *counting) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n := min(len(b), progressChunk)
		m, err := c.w.Write(b[:n])
		written += m
		if st := c.p.bar.State(); st.CurrentNum < st.Max {
			_ = c.p.bar.Add64(min(int64(m), st.Max-st.CurrentNum))
		}
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}
