package cpexpb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// MaxFrameSize is the largest protobuf message a Unix-socket frame carries
// (16 MiB), as cpex enforces.
const MaxFrameSize = 16 << 20

// frameHeaderSize is the 4-byte big-endian length that precedes each message.
const frameHeaderSize = 4

// ErrFrameTooLarge is returned for a frame longer than [MaxFrameSize].
var ErrFrameTooLarge = errors.New("cpexpb: frame larger than 16 MiB")

// AppendFrame appends m as one Unix-socket frame (length, then bytes) to
// dst, so it can be written with a single Write.
func AppendFrame(dst []byte, m proto.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return nil, fmt.Errorf("cpexpb: marshal %T: %w", m, err)
	}
	n := len(dst) - start - frameHeaderSize
	if n > MaxFrameSize {
		return nil, ErrFrameTooLarge
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

// ReadFrame reads one frame from r and returns its message bytes, reusing
// buf when it is large enough. A clean end of stream before the header is
// io.EOF; a stream cut inside a frame is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameSize {
		return nil, ErrFrameTooLarge
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
