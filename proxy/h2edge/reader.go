package h2edge

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"

	"golang.org/x/net/http2"
)

// reader is the connection's read buffer, between the connection and the
// framer. It holds no large buffer while the client sends little: reads
// go into a small array of its own, and a pooled 16 KiB buffer is taken
// only when a read fills that array, and given back as soon as it is
// drained. An idle connection so costs the small array, not 16 KiB.
//
// It also follows the frame boundaries in what the framer consumes
// (scan), which the framer keeps to itself: whether a read stopped in
// the middle of a frame or of a header block (the connection cannot go
// on after that), and how many empty CONTINUATION frames a block had.
type reader struct {
	nc    net.Conn
	big   *[]byte // pooled; nil while the small array serves
	r, w  int     // what is unread: buf()[r:w]
	small [smallRead]byte
	spill bool  // the last read filled the small array
	err   error // what scan found: every later Read returns it

	scanning bool // past the client preface: frames follow
	hdr      [frameHeaderLen]byte
	nh       int    // header bytes of the current frame read so far
	skip     uint32 // payload bytes of the current frame not yet read
	inBlock  bool   // in a header block: CONTINUATION frames follow
	blockID  uint32 // the stream of the last HEADERS frame begun
	headers  bool   // the last frame begun, CONTINUATIONs aside, was HEADERS
	// empty counts the empty CONTINUATION frames read (they do no work);
	// blockEmpty those of the current header block.
	empty, blockEmpty int
	maxLen            uint32 // the longest frame read since it was last cleared
}

const (
	frameHeaderLen = 9
	// smallRead is what an idle connection's read buffer costs: enough
	// for a request's HEADERS frame once HPACK's table is warm (its
	// fields indexed, the path a literal). A burst that fills it is read
	// on into a pooled buffer; over TLS that costs no system call, the
	// record being decrypted whole by the first read.
	smallRead = 256
	// keptFrame is the largest payload whose read buffer a quiet
	// connection's framer keeps (conn.between).
	keptFrame = 1024
	bigRead   = 16 << 10
	// maxEmptyContinuations ends a header block that has this many
	// CONTINUATION frames carrying nothing: a sender that makes no
	// progress, which the framer would otherwise read for ever.
	maxEmptyContinuations = floodLimit
)

// errEmptyContinuations is returned by the reader (so by ReadFrame) when
// a header block passes maxEmptyContinuations.
var errEmptyContinuations = errors.New("h2edge: header block of empty CONTINUATION frames")

var bigBufs = sync.Pool{New: func() any {
	b := make([]byte, bigRead)
	return &b
}}

func (rd *reader) buf() []byte {
	if rd.big != nil {
		return *rd.big
	}
	return rd.small[:]
}

// Buffered is how many bytes were read from the connection and not yet
// handed on.
func (rd *reader) Buffered() int { return rd.w - rd.r }

// whole: a whole frame is buffered, and not the first of a header block
// (whose CONTINUATION frames may not be), so that the framer's next
// frame comes without a read from the connection.
func (rd *reader) whole() bool {
	b := rd.buf()[rd.r:rd.w]
	if len(b) < frameHeaderLen {
		return false
	}
	length := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
	if http2.FrameType(b[3]) == http2.FrameHeaders && !http2.Flags(b[4]).Has(http2.FlagHeadersEndHeaders) {
		return false
	}
	return len(b) >= frameHeaderLen+length
}

func (rd *reader) Read(p []byte) (int, error) {
	if rd.err != nil {
		// Sticky: io.ReadFull drops an error that comes with the bytes
		// it asked for.
		return 0, rd.err
	}
	if rd.r == rd.w {
		if err := rd.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, rd.buf()[rd.r:rd.w])
	rd.r += n
	if rd.r == rd.w {
		rd.r, rd.w = 0, 0
		if rd.big != nil {
			bigBufs.Put(rd.big)
			rd.big = nil
		}
	}
	if rd.scanning {
		if err := rd.scan(p[:n]); err != nil {
			rd.err = err
			return n, err
		}
	}
	return n, nil
}

// fill reads once from the connection into an empty buffer: the small
// array, unless the last read filled it (more is on its way).
func (rd *reader) fill() error {
	if rd.spill && rd.big == nil {
		rd.big = bigBufs.Get().(*[]byte)
	}
	rd.r, rd.w = 0, 0
	for {
		n, err := rd.nc.Read(rd.buf())
		rd.w = n
		if n > 0 {
			rd.spill = rd.big == nil && n == len(rd.small)
			return nil
		}
		if err != nil {
			if rd.big != nil {
				bigBufs.Put(rd.big)
				rd.big = nil
			}
			return err
		}
	}
}

// wait reads from the connection when nothing is buffered, before the
// framer asks: an idle connection waits here, its goroutine's stack as
// shallow as the read loop can make it (the framer's frames and the
// reader's Read are not under it). The goroutine's stack is what an idle
// connection costs beside its buffers, and the runtime keeps a stack at
// the size its deepest wait needed.
func (rd *reader) wait() error {
	if rd.r < rd.w || rd.err != nil {
		return nil
	}
	return rd.fill()
}

// release gives the pooled buffer back, for a connection that ends.
func (rd *reader) release() {
	if rd.big != nil {
		bigBufs.Put(rd.big)
		rd.big = nil
	}
	rd.r, rd.w = 0, 0
}

// midFrame: the framer has read part of a frame, or of a header block,
// and not the rest: a read error now leaves the connection unusable.
func (rd *reader) midFrame() bool { return rd.nh > 0 || rd.skip > 0 || rd.inBlock }

// scan follows the frames in p, the bytes the framer just read.
func (rd *reader) scan(p []byte) error {
	for len(p) > 0 {
		if rd.skip > 0 {
			n := uint32(min(uint64(rd.skip), uint64(len(p))))
			rd.skip -= n
			p = p[n:]
			continue
		}
		n := copy(rd.hdr[rd.nh:], p)
		rd.nh += n
		p = p[n:]
		if rd.nh < frameHeaderLen {
			continue
		}
		rd.nh = 0
		length := uint32(rd.hdr[0])<<16 | uint32(rd.hdr[1])<<8 | uint32(rd.hdr[2])
		typ, flags := http2.FrameType(rd.hdr[3]), http2.Flags(rd.hdr[4])
		id := binary.BigEndian.Uint32(rd.hdr[5:]) & (1<<31 - 1)
		rd.skip = length
		rd.maxLen = max(rd.maxLen, length)
		switch typ {
		case http2.FrameHeaders:
			rd.headers, rd.blockID = true, id
			rd.inBlock = !flags.Has(http2.FlagHeadersEndHeaders)
			rd.blockEmpty = 0
		case http2.FrameContinuation:
			if flags.Has(http2.FlagContinuationEndHeaders) {
				rd.inBlock = false
			}
			if length == 0 {
				rd.empty++
				rd.blockEmpty++
				if rd.blockEmpty > maxEmptyContinuations {
					return errEmptyContinuations
				}
			}
		default:
			rd.headers = false
			rd.inBlock = false // the framer refuses anything else in a block
		}
	}
	return nil
}
