package load

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
)

// requestTail follows a request target: protocol, Host and headers.
// Requests are built once (list, Zipf) or appended into a per-connection
// buffer (sequence), never formatted per request.
func requestTail(addr string, headers []string) string {
	var b strings.Builder
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(addr)
	b.WriteString("\r\n")
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

func buildRequest(target, tail string) []byte {
	return []byte("GET " + target + tail)
}

// picker chooses the next request of one connection. Each connection has
// its own picker; what they share (the request list, the sequence counter)
// is read-only or atomic. next returns nil when a bounded sequence is
// exhausted.
type picker interface {
	next() []byte
}

// listPicker walks the requests in turn from a per-connection offset, so
// that connections do not move in lockstep over the same key.
type listPicker struct {
	reqs [][]byte
	i    int
}

func (p *listPicker) next() []byte {
	r := p.reqs[p.i]
	p.i = (p.i + 1) % len(p.reqs)
	return r
}

// zipfPicker draws requests by Zipf rank with the connection's own source.
type zipfPicker struct {
	reqs [][]byte
	z    *Zipf
	r    *rand.Rand
}

func (p *zipfPicker) next() []byte { return p.reqs[p.z.Rank(p.r)] }

// sequence is the shared state of ModeSequence: templates split at "{n}"
// and the count of requests handed out.
type sequence struct {
	prefix, suffix []string
	start, step    int64
	count          int64 // 0: unbounded
	tail           string
	n              atomic.Int64
}

func newSequence(templates []string, start, step, count int64, tail string) *sequence {
	s := &sequence{start: start, step: step, count: count, tail: tail}
	for _, t := range templates {
		p, q, _ := strings.Cut(t, "{n}")
		s.prefix = append(s.prefix, p)
		s.suffix = append(s.suffix, q)
	}
	return s
}

// target appends request i's target to dst.
func (s *sequence) appendTarget(dst []byte, i int64) []byte {
	k := int64(len(s.prefix))
	t := i % k
	dst = append(dst, s.prefix[t]...)
	dst = strconv.AppendInt(dst, s.start-i/k*s.step, 10)
	return append(dst, s.suffix[t]...)
}

type sequencePicker struct {
	seq *sequence
	buf []byte
}

func (p *sequencePicker) next() []byte {
	i := p.seq.n.Add(1) - 1
	if p.seq.count > 0 && i >= p.seq.count {
		return nil
	}
	p.buf = append(p.buf[:0], "GET "...)
	p.buf = p.seq.appendTarget(p.buf, i)
	p.buf = append(p.buf, p.seq.tail...)
	return p.buf
}

// newPickers makes one picker per connection for a timed mode.
func newPickers(s *Spec) []picker {
	tail := requestTail(s.Addr, s.Headers)
	out := make([]picker, s.Connections)
	switch s.Mode {
	case ModeSequence:
		seq := newSequence(s.Templates, s.SeqStart, s.SeqStep, s.SeqCount, tail)
		for i := range out {
			out[i] = &sequencePicker{seq: seq}
		}
		return out
	}
	reqs := make([][]byte, len(s.URLs))
	for i, u := range s.URLs {
		reqs[i] = buildRequest(u, tail)
	}
	var z *Zipf
	if s.Mode == ModeZipf {
		z = NewZipf(len(reqs), s.ZipfS)
	}
	for i := range out {
		if z != nil {
			out[i] = &zipfPicker{reqs: reqs, z: z, r: rand.New(rand.NewPCG(s.Seed, uint64(i)))}
		} else {
			out[i] = &listPicker{reqs: reqs, i: i * len(reqs) / len(out) % len(reqs)}
		}
	}
	return out
}

// SequenceTargets are the first count targets a ModeSequence run of these
// templates asks for, in order: the pages a bounded sequence fills, for a
// run that then draws from them.
func SequenceTargets(templates []string, start, step, count int64) []string {
	s := newSequence(templates, start, step, count, "")
	out := make([]string, count)
	for i := range out {
		out[i] = string(s.appendTarget(nil, int64(i)))
	}
	return out
}
