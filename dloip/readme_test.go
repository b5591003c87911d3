package dloip

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPeersREADME runs the README's lines that call a dloip server as
// written (only the ports swapped): its curl line, whose answer must be
// the JSON line below it, and its tritonclient lines, whose last line
// prints what its comment says, against a Server serving the README's
// model (an echo of any inputs) over REST and gRPC.
func TestPeersREADME(t *testing.T) {
	py := peerPython(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not installed")
	}
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, addr, base := serveBoth(t, Options{}, dynamicEcho())
	ports := strings.NewReplacer("localhost:8000", strings.TrimPrefix(base, "http://"), "localhost:8001", addr)
	lines := strings.Split(string(doc), "\n")
	ran := map[string]int{}
	for i := 0; i < len(lines); i++ {
		switch {
		case strings.HasPrefix(lines[i], "curl ") && strings.Contains(lines[i], "localhost:8000"):
			want := ""
			for j := i + 1; j+1 < len(lines); j++ {
				if lines[j] == "```json" {
					want = lines[j+1]
					break
				}
			}
			out, err := exec.Command("bash", "-c", strings.Replace(ports.Replace(lines[i]), "curl ", curl+" ", 1)).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != want {
				t.Fatalf("%s\ngot  %s (%v)\nwant %s", lines[i], out, err, want)
			}
			ran["curl"]++
		case lines[i] == "```python" && i+1 < len(lines) && strings.Contains(lines[i+1], "tritonclient"):
			var src []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				src = append(src, ports.Replace(lines[i]))
			}
			last := src[len(src)-1]
			k := strings.LastIndex(last, "# ")
			if k < 0 {
				t.Fatalf("the README's tritonclient lines end without a comment saying what they print: %q", last)
			}
			want := strings.TrimSpace(last[k+2:])
			out, err := exec.Command(py, "-c", strings.Join(src, "\n")).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != want {
				t.Fatalf("%s\ngot  %s (%v)\nwant %s", strings.Join(src, "\n"), out, err, want)
			}
			ran["tritonclient"]++
		}
	}
	if ran["curl"] == 0 || ran["tritonclient"] == 0 {
		t.Fatalf("the README's lines that call a dloip server: %v run, want curl and tritonclient", ran)
	}
	t.Logf("the README's %d curl and %d tritonclient lines against a dloip server print what it says, as written", ran["curl"], ran["tritonclient"])
}
