package main

import (
	"bytes"
	"context"
	_ "embed"
	"net"
	"os"
	"path/filepath"
	"time"
)

// varnishVCLTemplate is bench/varnish.vcl.tmpl.
//
//go:embed varnish.vcl.tmpl
var varnishVCLTemplate string

type varnishVCL struct {
	UpstreamHost, UpstreamPort, UpstreamKey string
}

func renderVarnishVCL(c varnishVCL) ([]byte, error) {
	return renderTemplate("varnish.vcl", varnishVCLTemplate, c)
}

// varnishVersion returns the varnishd on PATH and its version.
func varnishVersion() (path, version string) {
	return toolVersion("varnishd", "varnishd ", "-V")
}

// varnishArgs are varnishd's arguments: foreground, one listen address,
// the VCL, a 256 MB malloc store, its own work directory, gzip handling
// off (varnish.vcl.tmpl says why).
func varnishArgs(listen, vcl, workDir string) []string {
	return []string{"-F", "-a", listen, "-f", vcl, "-s", "malloc,256m", "-n", workDir, "-p", "http_gzip_support=off"}
}

// startVarnish starts varnishd with a fresh work directory (an empty
// cache), its manager and cache process both pinned to the server CPU.
func (b *bench) startVarnish(ctx context.Context) (srv *server, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.tmp, "varnish-")
	if err != nil {
		return nil, err
	}
	defer ownScratch(&srv, dir)
	_ = os.Chmod(dir, 0o755)
	host, port, err := net.SplitHostPort(b.upstream.addr)
	if err != nil {
		return nil, err
	}
	vcl, err := renderVarnishVCL(varnishVCL{UpstreamHost: host, UpstreamPort: port, UpstreamKey: b.simKey})
	if err != nil {
		return nil, err
	}
	vclPath := filepath.Join(dir, "bench.vcl")
	if err := os.WriteFile(vclPath, vcl, 0o644); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(b.out, "varnish.vcl"), bytes.ReplaceAll(vcl, []byte(b.simKey), []byte("<legacy key>")), 0o644)
	// The VCL is compiled with the C compiler at start: give it time.
	return b.serve(ctx, "varnish", b.opt.serverCPU, addr, 30*time.Second, b.varnish, varnishArgs(addr, vclPath, filepath.Join(dir, "work"))...)
}
