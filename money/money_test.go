package money

import (
	"math"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want Micros
		err  error
	}{
		{"5", 2, 5_000_000, nil},
		{"5.00", 2, 5_000_000, nil},
		{"10000.00", 2, 10_000_000_000, nil},
		{"0.01", 2, 10_000, nil},
		{"0.004", 6, 4_000, nil},
		{"-1.5", 6, -1_500_000, nil},
		{"1.001", 2, 0, ErrTooPrecise},
		{"1.", 2, 0, ErrInvalid},
		{".5", 2, 0, ErrInvalid},
		{"+5", 2, 0, ErrInvalid},
		{"5e2", 2, 0, ErrInvalid},
		{" 5", 2, 0, ErrInvalid},
		{"1,000", 2, 0, ErrInvalid},
		{"", 2, 0, ErrInvalid},
		{"-", 2, 0, ErrInvalid},
		{"NaN", 2, 0, ErrInvalid},
		{"9999999999999", 2, 0, ErrInvalid},
		{"999999999999.99", 2, 999_999_999_999_990_000, nil},
	}
	for _, c := range cases {
		got, err := Parse(c.in, c.max)
		if err != c.err || got != c.want {
			t.Errorf("Parse(%q, %d) = %d, %v; want %d, %v", c.in, c.max, got, err, c.want, c.err)
		}
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		m    Micros
		dec  int
		want string
	}{
		{5_000_000, 2, "5.00"},
		{5_000_000, 6, "5.000000"},
		{4_000, 6, "0.004000"},
		{4_000, 2, "0.004"},
		{-1_500_000, 2, "-1.50"},
		{1, 2, "0.000001"},
		{0, 2, "0.00"},
		{Micros(math.MinInt64), 2, "-9223372036854.775808"},
	}
	for _, c := range cases {
		if got := c.m.Format(c.dec); got != c.want {
			t.Errorf("%d.Format(%d) = %q, want %q", c.m, c.dec, got, c.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, v := range []Micros{0, 1, -1, 999_999, 1_000_000, 123_456_789, -987_654_321_012} {
		got, err := Parse(v.String(), 6)
		if err != nil || got != v {
			t.Errorf("round trip of %d: %d, %v", v, got, err)
		}
	}
}

func TestMulDivFloor(t *testing.T) {
	// 125 participant-seconds at 0.004000 per minute = 0.008333 (floor of 8333.33 micros)
	if got, ok := MulDivFloor(125, 4_000, 60); !ok || got != 8_333 {
		t.Fatalf("MulDivFloor(125, 4000, 60) = %d, %v", got, ok)
	}
	if got, ok := MulDivFloor(math.MaxInt64, 2, 4); !ok || got != math.MaxInt64/2 {
		t.Fatalf("large = %d, %v", got, ok)
	}
	if _, ok := MulDivFloor(math.MaxInt64, math.MaxInt64, 1); ok {
		t.Fatal("overflow not reported")
	}
	if _, ok := MulDivFloor(-1, 1, 1); ok {
		t.Fatal("negative not refused")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"5.00", "-0.000001", "1e5", "99999999999.999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s, 6)
		if err != nil {
			return
		}
		back, err := Parse(m.String(), 6)
		if err != nil || back != m {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, m, m.String(), back, err)
		}
	})
}
