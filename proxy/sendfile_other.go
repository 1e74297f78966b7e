//go:build !linux

package proxy

import "io"

// WriteTo writes the page from memory: page files are Linux only, and the
// cache makes none elsewhere (cache/files.go).
func (b *fileBody) WriteTo(w io.Writer) (int64, error) { return b.writeHeap(w) }
