package localstore

import (
	"hash/crc32"

	"github.com/ternmq/tern/protocols"
)

// A segment record's CRC-32C covers its entry: the envelope, then the
// batch. The batch carries a CRC-32C of its own over everything from its
// attributes on, and callers check it before they append (AppendRequest).
// So for a large entry the record's CRC is derived from the batch's and
// a CRC of the few bytes in front of what it covers, with the algebra of
// zlib's crc32_combine, instead of a second pass over the records.

// combineMin is the size of the covered part from which deriving the
// record's CRC is cheaper than computing it: the derivation costs a few
// hundred nanoseconds whatever the size, a pass about 0.04 ns a byte
// (BenchmarkRecordSum).
const combineMin = 4 << 10

// recordSum returns the CRC-32C of head followed by body, an entry whose
// batch starts at batchAt in head and whose batch CRC has been checked.
func recordSum(head, body []byte, batchAt int) uint32 {
	sum, from := protocols.BatchCRC(head[batchAt:])
	from += batchAt
	covered := len(head) - from + len(body)
	if covered < combineMin {
		return crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, body)
	}
	return crc32Combine(crc32.Checksum(head[:from], castagnoli), sum, int64(covered))
}

// crc32Combine returns the CRC-32C of a followed by b, given the CRC-32C
// of each and b's length in bytes: a's CRC shifted past n bytes of zeros
// (multiplied by x^(8n) modulo the polynomial), then b's added.
func crc32Combine(crcA, crcB uint32, n int64) uint32 {
	return multModP(xPow8n(n), crcA) ^ crcB
}

// The polynomials below are bit-reflected, as hash/crc32 computes them:
// the coefficient of x^0 is the top bit.
const (
	castagnoliReflected = 0x82f63b78
	xPow0               = 1 << 31
)

// multModP returns a times b modulo the Castagnoli polynomial.
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(xPow0); m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2k holds x^(2^k) modulo the polynomial. It is not cyclic in k with
// period 32 as zlib's table for its own polynomial may assume: modulo
// Castagnoli's, x^(2^31) is x, so x^(2^32) is x^2, not x. Records are
// below 4 GiB, 2^35 bits, so 64 entries are more than enough.
var xPow2k = func() (t [64]uint32) {
	t[0] = xPow0 >> 1 // x
	for k := 1; k < len(t); k++ {
		t[k] = multModP(t[k-1], t[k-1])
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial.
func xPow8n(n int64) uint32 {
	p := uint32(xPow0)
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = multModP(xPow2k[k], p)
		}
		n >>= 1
	}
	return p
}
