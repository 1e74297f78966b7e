package main

import (
	"bytes"
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"time"
)

// nginxConfTemplate is bench/nginx.conf.tmpl.
//
//go:embed nginx.conf.tmpl
var nginxConfTemplate string

type nginxConf struct {
	Prefix, Listen, Upstream, UpstreamKey string
	// Tuned turns on the open file cache (nginx-tuned).
	Tuned bool
	// TLS terminates TLS on Listen with CertFile and KeyFile.
	TLS               bool
	CertFile, KeyFile string
	// Connections, when set, is worker_connections (else 4096), and Files
	// worker_rlimit_nofile.
	Connections, Files int
}

func renderNginxConf(c nginxConf) ([]byte, error) {
	return renderTemplate("nginx.conf", nginxConfTemplate, c)
}

// nginxVersion returns the nginx on PATH and its version (nginx -v).
func nginxVersion() (path, version string) {
	return toolVersion("nginx", "nginx version: ", "-v")
}

// startNginx starts nginx in a new prefix directory (an empty cache each
// time), master and one worker, both pinned to the server CPU: tuned, the
// nginx-tuned row's configuration; withTLS, on TLS with the run's
// certificate; conns, when above nginx's 4096, the connections it must
// hold (the idle rows).
func (b *bench) startNginx(ctx context.Context, tuned, withTLS bool, conns int) (srv *server, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prefix, err := os.MkdirTemp(b.tmp, "nginx-")
	if err != nil {
		return nil, err
	}
	defer ownScratch(&srv, prefix)
	// Run as root, nginx's workers switch to an unprivileged user, which
	// must reach the cache and temp directories.
	for _, d := range []string{"cache", "tmp", "logs"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o777); err != nil {
			return nil, err
		}
		_ = os.Chmod(filepath.Join(prefix, d), 0o777)
	}
	_ = os.Chmod(prefix, 0o755)
	c := nginxConf{Prefix: prefix, Listen: addr, Upstream: b.upstream.addr, UpstreamKey: b.simKey, Tuned: tuned, TLS: withTLS}
	if withTLS {
		c.CertFile, c.KeyFile = b.cert.cert, b.cert.key
	}
	if conns > 4096-256 { // 256 for its upstream connections and files
		c.Connections = conns + 256
		c.Files = 2*c.Connections + 64
	}
	conf, err := renderNginxConf(c)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		return nil, err
	}
	// The conf names the legacy key; the copy kept with the results does
	// not.
	name := "nginx"
	switch {
	case tuned:
		name = "nginx-tuned"
	case withTLS:
		name = "nginx-tls"
	}
	_ = os.WriteFile(filepath.Join(b.out, name+".conf"), bytes.ReplaceAll(conf, []byte(b.simKey), []byte("<legacy key>")), 0o644)
	srv, err = b.serve(ctx, name, b.opt.serverCPU, addr, 10*time.Second, b.nginx, "-p", prefix, "-c", confPath, "-e", "stderr")
	if srv != nil {
		srv.tls = withTLS
	}
	return srv, err
}
