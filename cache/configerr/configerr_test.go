package configerr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A List gathers the problems of every part, joined, wrapped or alone,
// and sorts them as an editor walks a file: the placed ones first, then
// the file's own, then the rest by path.
func TestListGathersAndSorts(t *testing.T) {
	var section List
	section.Add("b.y", "second")
	var plan List
	plan.Add("window", "must be at least 1s")
	_, readErr := os.ReadFile("/nonexistent/file")
	var l List
	l.Append(nil)
	l.Append(errors.Join(section.Err(), &FieldError{Path: "a.x", Line: 3, Col: 5, Msg: "first"}))
	l.Append(fmt.Errorf("wrapped: %w", Wrap("c.file", "the file", readErr)))
	l.Append(errors.New("the file as a whole"))
	l.AppendAt("plans.free", plan.Err())
	l.Sort()
	want := []string{
		"line 3:5: a.x: first",
		"the file as a whole",
		"b.y: second",
		"c.file: the file: open /nonexistent/file: no such file or directory",
		"plans.free.window: must be at least 1s",
	}
	if len(l) != len(want) {
		t.Fatalf("list:\n%v", l)
	}
	for i, e := range l {
		if e.Error() != want[i] {
			t.Errorf("%d: %q, want %q", i, e.Error(), want[i])
		}
	}
	if !errors.Is(l[3], fs.ErrNotExist) {
		t.Error("a wrapped cause is lost")
	}
	if (List{}).Err() != nil || l.Err() == nil {
		t.Error("Err: nil for an empty List only")
	}
	hinted := FieldError{Path: "server.read_timeout", Line: 2, Msg: "10 has no unit", Hint: "add a unit, such as 1m"}
	if got := hinted.Error(); got != "line 2: server.read_timeout: 10 has no unit; add a unit, such as 1m" {
		t.Errorf("with a hint: %q", got)
	}
}

// CheckListen refuses what net.Listen would refuse for its form.
func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{":8080", true}, {"127.0.0.1:0", true}, {"[::1]:9090", true}, {"localhost:65535", true},
		{"edge.internal:http", true}, {"0.0.0.0:8080", true},
		{"127.0.0.1:99999", false}, {"127.0.0.1:-1", false}, {"127.0.0.1:", false}, {"8080", false},
		{"nope", false}, {"bad host:80", false}, {"127.0.0.1:no-such-service-x", false}, {"-edge:80", false},
	} {
		if err := CheckListen(tc.addr); (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}
