// Package money owns amounts of money: integer micro-units of a currency
// (six decimal places, the precision of the participant-minute price) in
// memory and on disk, decimal strings on the wire. Parsing and formatting
// are exact: no floating point anywhere.
package money

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Micros is an amount in millionths of a currency unit (e.g. 1 USD = 1_000_000).
type Micros int64

// MicrosPerUnit is the number of micro-units in one currency unit.
const MicrosPerUnit = 1_000_000

// MaxDecimals is the most decimal places an amount can carry.
const MaxDecimals = 6

// maxParseDigits bounds the integer part so parsing cannot overflow int64.
const maxParseDigits = 12

// ErrInvalid is returned for a string that is not a plain decimal amount.
var ErrInvalid = errors.New("money: not a decimal amount")

// ErrTooPrecise is returned when an amount has more decimals than allowed.
var ErrTooPrecise = errors.New("money: too many decimal places")

// Parse reads a plain decimal string ("12", "12.5", "-0.000001") with at
// most maxDecimals decimal places (<= MaxDecimals). No exponent, no
// thousands separators, no leading '+', no surrounding spaces.
func Parse(s string, maxDecimals int) (Micros, error) {
	if maxDecimals < 0 || maxDecimals > MaxDecimals {
		maxDecimals = MaxDecimals
	}
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > maxParseDigits || (hasDot && frac == "") || !digits(intPart) || !digits(frac) {
		return 0, ErrInvalid
	}
	if len(frac) > maxDecimals {
		return 0, ErrTooPrecise
	}
	whole, _ := strconv.ParseInt(intPart, 10, 64)
	fracMicros := int64(0)
	if frac != "" {
		padded := frac + strings.Repeat("0", MaxDecimals-len(frac))
		fracMicros, _ = strconv.ParseInt(padded, 10, 64)
	}
	v := whole*MicrosPerUnit + fracMicros
	if neg {
		v = -v
	}
	return Micros(v), nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String renders m with exactly decimals decimal places (0..6), truncating
// nothing: it is an error of the caller to ask for fewer decimals than the
// value holds, so String always shows six when that would lose precision.
func (m Micros) String() string { return m.Format(MaxDecimals) }

// Format renders m with at least decimals decimal places, more when the
// value needs them (never rounded).
func (m Micros) Format(decimals int) string {
	if decimals < 0 {
		decimals = 0
	}
	if decimals > MaxDecimals {
		decimals = MaxDecimals
	}
	v := int64(m)
	sign := ""
	var u uint64
	if v < 0 {
		sign = "-"
		u = uint64(-(v + 1)) + 1 // safe for math.MinInt64
	} else {
		u = uint64(v)
	}
	whole := u / MicrosPerUnit
	frac := u % MicrosPerUnit
	fracStr := strconv.FormatUint(frac+MicrosPerUnit, 10)[1:] // six digits
	keep := MaxDecimals
	for keep > decimals && fracStr[keep-1] == '0' {
		keep--
	}
	out := sign + strconv.FormatUint(whole, 10)
	if keep > 0 {
		out += "." + fracStr[:keep]
	}
	return out
}

// MulDivFloor returns floor(a*b/c) for non-negative a, b and positive c
// without overflow for a*b up to 2^127 (it uses 128-bit intermediate
// arithmetic). ok is false when the result does not fit in int64.
func MulDivFloor(a, b, c int64) (int64, bool) {
	if a < 0 || b < 0 || c <= 0 {
		return 0, false
	}
	hi, lo := mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := div128(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}
