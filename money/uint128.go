package money

import "math/bits"

func mul64(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }

// div128 divides hi:lo by c; the caller guarantees hi < c.
func div128(hi, lo, c uint64) (q, r uint64) { return bits.Div64(hi, lo, c) }
