//go:build !linux

package proxy

import "io"

// WriteTo writes the page from memory: page files are Linux only, and the
// cache makes none elsewhere (cache/files.go).
func (b *fileBody) WriteTo(w io.Writer) (int64, error) { return b.writeHeap(w) }

// cork and uncork do nothing: TCP_CORK is Linux's (other systems' TCP_NOPUSH
// differs in when it pushes), and no page is sent from a file there.
func (b *fileBody) cork()   {}
func (b *fileBody) uncork() {}
