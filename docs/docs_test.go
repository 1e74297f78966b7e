package docs_test

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"

	"tradergate/docs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpenAPIIsACopy: a caller that changes its copy must not change what
// the edge serves next.
func TestOpenAPIIsACopy(t *testing.T) {
	a := docs.OpenAPI()
	want := bytes.Clone(a)
	a[0] = 'x'
	if b := docs.OpenAPI(); !bytes.Equal(b, want) {
		t.Fatal("changing one copy changed the next")
	}
}
