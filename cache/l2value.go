package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/cespare/xxhash/v2"
)

// The value of a page in the shared tier, versioned so that replicas of two
// releases can share one Redis: a value this release cannot read is a miss
// (counted as corrupt), never an error, and the next store overwrites it.
//
//	offset  size  field
//	0       4     magic "tgpc"
//	4       1     version (valueVersion)
//	5       1     flags: 1 immutable, 2 body is identity (else gzip)
//	6       8     stored at, Unix nanoseconds
//	14      8     TTL, nanoseconds
//	22      8     stale_while_revalidate, nanoseconds
//	30      8     stale_if_error, nanoseconds
//	38      4     length of the identity body
//	42      1     length n of the identity ETag
//	43      n     identity ETag
//	43+n    ...   body
//	end-8   8     xxHash64 of everything before it
//
// The body is the gzip form: Redis memory and the network carry the small
// copy, and a replica serving gzip clients never inflates it. A page that
// gzip does not shrink, or one at most compress_min_bytes long, is carried
// identity. The checksum catches a truncated or foreign value before any of
// it is trusted; a gzip stream that passes it inflates (forms.go).

const (
	valueMagic   = "tgpc"
	valueVersion = 1

	flagImmutable = 1 << 0
	flagIdentity  = 1 << 1

	valueHeader = 43
	valueSum    = 8
	// maxIdentity bounds the identity length a value may claim, so that a
	// bad one cannot make inflation allocate without limit: Redis strings
	// stop at 512 MiB.
	maxIdentity = 512 << 20
)

var errValue = errors.New("cache: shared value does not decode")

// sharedValue is a page as the shared tier carries it.
type sharedValue struct {
	stored        time.Time
	ttl, swr, sie time.Duration
	immutable     bool
	identity      bool
	idLen         int
	etag          string
	body          []byte
}

func encodeValue(e *Entry, body []byte, identity bool) []byte {
	b := make([]byte, 0, valueHeader+len(e.ETag)+len(body)+valueSum)
	b = append(b, valueMagic...)
	b = append(b, valueVersion)
	var flags byte
	if e.Immutable {
		flags |= flagImmutable
	}
	idLen := len(body)
	if identity {
		flags |= flagIdentity
	} else {
		idLen = len(e.Body())
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Stored.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(e.TTL))
	b = binary.BigEndian.AppendUint64(b, uint64(e.swr))
	b = binary.BigEndian.AppendUint64(b, uint64(e.sie))
	b = binary.BigEndian.AppendUint32(b, uint32(idLen))
	b = append(b, byte(len(e.ETag)))
	b = append(b, e.ETag...)
	b = append(b, body...)
	return binary.BigEndian.AppendUint64(b, xxhash.Sum64(b))
}

func decodeValue(b []byte) (sharedValue, error) {
	var v sharedValue
	if len(b) < valueHeader+valueSum || string(b[:4]) != valueMagic || b[4] != valueVersion {
		return v, errValue
	}
	end := len(b) - valueSum
	if xxhash.Sum64(b[:end]) != binary.BigEndian.Uint64(b[end:]) {
		return v, errValue
	}
	flags := b[5]
	v.immutable = flags&flagImmutable != 0
	v.identity = flags&flagIdentity != 0
	v.stored = time.Unix(0, int64(binary.BigEndian.Uint64(b[6:])))
	v.ttl = time.Duration(binary.BigEndian.Uint64(b[14:]))
	v.swr = time.Duration(binary.BigEndian.Uint64(b[22:]))
	v.sie = time.Duration(binary.BigEndian.Uint64(b[30:]))
	v.idLen = int(binary.BigEndian.Uint32(b[38:]))
	n := int(b[42])
	if flags&^(flagImmutable|flagIdentity) != 0 || v.ttl <= 0 || v.swr < 0 || v.sie < 0 ||
		v.idLen > maxIdentity || n == 0 || valueHeader+n > end {
		return v, errValue
	}
	v.etag = string(b[valueHeader : valueHeader+n])
	v.body = b[valueHeader+n : end : end]
	if v.identity && len(v.body) != v.idLen {
		return v, errValue
	}
	return v, nil
}

// sharedKeys are the Redis names of one page. The page key is hashed:
// their length is bounded, and nothing of the request is readable in
// Redis. The hash sits in braces, a Redis Cluster hash tag, so that the
// three keys of a page live in one slot and one MGET reads them.
type sharedKeys struct {
	hash              string // hex SHA-256 of the page key, 128 bits
	value, lock, fail string
}

func (l *l2) keys(key string) sharedKeys {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:16])
	base := l.prefix + "{" + h + "}"
	return sharedKeys{hash: h, value: base + "v", lock: base + "l", fail: base + "f"}
}
