package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
)

// lineFilter passes a process's output through to dst line by line,
// dropping and counting the lines that contain drop. tradergate writes an
// access log line per request to stderr and has no switch for it yet;
// kept, a run would leave gigabytes of them. The count tells the report
// whether access logging was on.
type lineFilter struct {
	dst     io.Writer
	drop    []byte
	partial []byte
	dropped int64
}

func (f *lineFilter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			// Bound the carry-over: a line longer than this is not an
			// access log line worth holding back.
			if len(f.partial)+len(p) > 64<<10 {
				if err := f.flush(); err != nil {
					return n, err
				}
				_, err := f.dst.Write(p)
				return n, err
			}
			f.partial = append(f.partial, p...)
			return n, nil
		}
		line := p[:i+1]
		p = p[i+1:]
		if len(f.partial) > 0 {
			line = append(f.partial, line...)
			f.partial = f.partial[:0]
		}
		if bytes.Contains(line, f.drop) {
			f.dropped++
			continue
		}
		if _, err := f.dst.Write(line); err != nil {
			return n, err
		}
	}
	return n, nil
}

// flush writes out an unterminated last line.
func (f *lineFilter) flush() error {
	if len(f.partial) == 0 {
		return nil
	}
	_, err := f.dst.Write(f.partial)
	f.partial = f.partial[:0]
	return err
}

// filterFile copies src to a new dst without the lines containing drop and
// returns how many it dropped.
func filterFile(src, dst string, drop []byte) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(out, 64<<10)
	f := &lineFilter{dst: w, drop: drop}
	_, err = io.Copy(f, in)
	if err == nil {
		err = f.flush()
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return f.dropped, err
}
