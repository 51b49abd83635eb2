package webhooksig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

const testSecret = "whsec_test_5f2b9c0e7a1d4e6f8a3b"

var testBody = []byte(`{"id":"evt_01","type":"participant.joined","created_at":"2024-03-01T12:00:00Z","project_id":"prj_01","data":{"room_id":"room_01","participant_id":"par_01"}}`)

const testTimestamp = int64(1709294400)

var testNow = time.Unix(testTimestamp, 0)

// handRolledHMACSHA256 is RFC 2104 HMAC written out over crypto/sha256,
// without crypto/hmac, so that it is independent of the code under test.
func handRolledHMACSHA256(key, message []byte) []byte {
	const blockSize = 64 // SHA-256 block size in bytes
	if len(key) > blockSize {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	padded := make([]byte, blockSize)
	copy(padded, key)
	inner := make([]byte, blockSize)
	outer := make([]byte, blockSize)
	for i := range padded {
		inner[i] = padded[i] ^ 0x36
		outer[i] = padded[i] ^ 0x5c
	}
	innerSum := sha256.Sum256(append(inner, message...))
	outerSum := sha256.Sum256(append(outer, innerSum[:]...))
	return outerSum[:]
}

// opensslHMACSHA256 asks the openssl command line tool for the HMAC.
func opensslHMACSHA256(t *testing.T, path string, key string, message []byte) string {
	t.Helper()
	cmd := exec.Command(path, "dgst", "-sha256", "-hmac", key)
	cmd.Stdin = bytes.NewReader(message)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl dgst: %v", err)
	}
	// Output looks like "HMAC-SHA2-256(stdin)= <hex>" or "(stdin)= <hex>"
	// depending on the openssl version; the hex is the last field.
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		t.Fatalf("openssl dgst printed nothing")
	}
	return fields[len(fields)-1]
}

func TestSignAgreesWithIndependentImplementations(t *testing.T) {
	cases := []struct {
		name   string
		secret string
		ts     int64
		body   []byte
	}{
		{"envelope", testSecret, testTimestamp, testBody},
		{"empty body", testSecret, testTimestamp, nil},
		{"binary body", testSecret, 1, []byte{0, 1, 2, 0xff, '\n', '.', 0}},
		{"utf8 body", testSecret, 2000000000, []byte(`{"name":"Zoë ✓ 日本"}`)},
		{"secret longer than a block", "whsec_" + strings.Repeat("k", 100), testTimestamp, testBody},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Sign(tc.secret, tc.ts, tc.body)
			signed := append([]byte(strconv.FormatInt(tc.ts, 10)+"."), tc.body...)

			want := "v1=" + hex.EncodeToString(handRolledHMACSHA256([]byte(tc.secret), signed))
			if got != want {
				t.Fatalf("Sign = %s, hand-rolled HMAC = %s", got, want)
			}
			// And an independently computed header verifies.
			if err := Verify(tc.secret, tc.body, strconv.FormatInt(tc.ts, 10), want, DefaultTolerance, time.Unix(tc.ts, 0)); err != nil {
				t.Fatalf("Verify(independent signature) = %v", err)
			}
		})
	}
	// The openssl command line tool is the implementation this package
	// shares nothing with; without it only this part skips (or, in CI,
	// fails).
	t.Run("openssl", func(t *testing.T) {
		opensslPath := testtools.RequireOnPath(t, "openssl", "apt-get install openssl (Debian)")
		for _, tc := range cases {
			signed := append([]byte(strconv.FormatInt(tc.ts, 10)+"."), tc.body...)
			if got, want := Sign(tc.secret, tc.ts, tc.body), "v1="+opensslHMACSHA256(t, opensslPath, tc.secret, signed); got != want {
				t.Fatalf("%s: Sign = %s, openssl = %s", tc.name, got, want)
			}
		}
	})
}

func TestVerifyAcceptsAuthentic(t *testing.T) {
	ts := strconv.FormatInt(testTimestamp, 10)
	sig := Sign(testSecret, testTimestamp, testBody)
	other := Sign("whsec_old_secret", testTimestamp, testBody)
	cases := map[string]string{
		"single":                   sig,
		"rotation, match first":    sig + "," + other,
		"rotation, match second":   other + "," + sig,
		"space after comma":        other + ", " + sig,
		"uppercase hex":            "v1=" + strings.ToUpper(strings.TrimPrefix(sig, "v1=")),
		"unknown scheme ignored":   "v2=" + strings.Repeat("ab", 40) + "," + sig,
		"duplicate entry":          sig + "," + sig,
		"surrounding white space":  " " + sig + " ",
		"rotation of three values": other + "," + Sign("whsec_other", testTimestamp, testBody) + "," + sig,
	}
	for name, header := range cases {
		t.Run(name, func(t *testing.T) {
			if err := Verify(testSecret, testBody, ts, header, DefaultTolerance, testNow); err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
		})
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	ts := strconv.FormatInt(testTimestamp, 10)
	sig := Sign(testSecret, testTimestamp, testBody)

	t.Run("every single body byte", func(t *testing.T) {
		for i := range testBody {
			tampered := append([]byte{}, testBody...)
			tampered[i] ^= 0x01
			if err := Verify(testSecret, tampered, ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
				t.Fatalf("byte %d flipped: Verify = %v, want ErrSignatureMismatch", i, err)
			}
		}
	})
	t.Run("appended byte", func(t *testing.T) {
		tampered := append(append([]byte{}, testBody...), '\n')
		if err := Verify(testSecret, tampered, ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("timestamp changed by one second", func(t *testing.T) {
		moved := strconv.FormatInt(testTimestamp+1, 10)
		if err := Verify(testSecret, testBody, moved, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("timestamp zero padded", func(t *testing.T) {
		// Same number, different signed bytes: the header is signed as sent.
		if err := Verify(testSecret, testBody, "0"+ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("JSON re-serialised with other whitespace", func(t *testing.T) {
		var indented bytes.Buffer
		if err := json.Indent(&indented, testBody, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := Verify(testSecret, indented.Bytes(), ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("JSON decoded and re-encoded", func(t *testing.T) {
		var decoded map[string]any
		if err := json.Unmarshal(testBody, &decoded); err != nil {
			t.Fatal(err)
		}
		reencoded, err := json.Marshal(decoded) // sorts keys
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(reencoded, testBody) {
			t.Fatal("test body must differ from its re-encoding")
		}
		if err := Verify(testSecret, reencoded, ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		if err := Verify("whsec_wrong", testBody, ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("one signature hex digit changed", func(t *testing.T) {
		last := sig[len(sig)-1]
		replacement := byte('0')
		if last == '0' {
			replacement = '1'
		}
		changed := sig[:len(sig)-1] + string(replacement)
		if err := Verify(testSecret, testBody, ts, changed, DefaultTolerance, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
	t.Run("forged stale signature is a mismatch, not a tolerance error", func(t *testing.T) {
		later := testNow.Add(time.Hour)
		if err := Verify(testSecret, testBody, ts, Sign("whsec_wrong", testTimestamp, testBody), DefaultTolerance, later); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("Verify = %v, want ErrSignatureMismatch", err)
		}
	})
}

func TestVerifyTolerance(t *testing.T) {
	ts := strconv.FormatInt(testTimestamp, 10)
	sig := Sign(testSecret, testTimestamp, testBody)
	cases := []struct {
		name      string
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"exactly on time", testNow, DefaultTolerance, nil},
		{"five minutes late", testNow.Add(5 * time.Minute), DefaultTolerance, nil},
		{"five minutes early", testNow.Add(-5 * time.Minute), DefaultTolerance, nil},
		{"one second past five minutes late", testNow.Add(5*time.Minute + time.Second), DefaultTolerance, ErrTimestampOutsideTolerance},
		{"one second past five minutes early", testNow.Add(-5*time.Minute - time.Second), DefaultTolerance, ErrTimestampOutsideTolerance},
		{"zero tolerance means default, inside", testNow.Add(4 * time.Minute), 0, nil},
		{"zero tolerance means default, outside", testNow.Add(6 * time.Minute), 0, ErrTimestampOutsideTolerance},
		{"negative tolerance means default", testNow.Add(4 * time.Minute), -time.Second, nil},
		{"custom tolerance, inside", testNow.Add(50 * time.Second), time.Minute, nil},
		{"custom tolerance, outside", testNow.Add(61 * time.Second), time.Minute, ErrTimestampOutsideTolerance},
		{"far future clock", time.Unix(1<<40, 0), DefaultTolerance, ErrTimestampOutsideTolerance},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(testSecret, testBody, ts, sig, tc.tolerance, tc.now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVerifyExtremeTimestampsDoNotOverflow(t *testing.T) {
	for _, ts := range []int64{0, 1<<63 - 1} {
		header := strconv.FormatInt(ts, 10)
		sig := Sign(testSecret, ts, testBody)
		if err := Verify(testSecret, testBody, header, sig, DefaultTolerance, testNow); !errors.Is(err, ErrTimestampOutsideTolerance) {
			t.Fatalf("timestamp %d: Verify = %v, want ErrTimestampOutsideTolerance", ts, err)
		}
	}
}

func TestVerifyMalformed(t *testing.T) {
	ts := strconv.FormatInt(testTimestamp, 10)
	sig := Sign(testSecret, testTimestamp, testBody)
	hex64 := strings.Repeat("a", 64)
	cases := []struct {
		name string
		ts   string
		sig  string
	}{
		{"empty timestamp", "", sig},
		{"letters in timestamp", "17092944OO", sig},
		{"negative timestamp", "-1709294400", sig},
		{"plus sign", "+1709294400", sig},
		{"space in timestamp", " 1709294400", sig},
		{"fractional timestamp", "1709294400.5", sig},
		{"milliseconds overflowing int64", "99999999999999999999", sig},
		{"empty signature", ts, ""},
		{"no equals sign", ts, "v1"},
		{"empty value", ts, "v1="},
		{"empty scheme", ts, "=" + hex64},
		{"not hex", ts, "v1=" + strings.Repeat("z", 64)},
		{"63 hex digits", ts, "v1=" + strings.Repeat("a", 63)},
		{"65 hex digits", ts, "v1=" + strings.Repeat("a", 65)},
		{"only other schemes", ts, "v0=" + hex64 + ",v2=" + hex64},
		{"empty entry", ts, sig + ","},
		{"too many entries", ts, strings.TrimSuffix(strings.Repeat(sig+",", maxSignatures+1), ",")},
		{"too long", ts, sig + ",x=" + strings.Repeat("a", maxSignatureHeaderBytes)},
		{"bare hex without scheme", ts, strings.TrimPrefix(sig, "v1=")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(testSecret, testBody, tc.ts, tc.sig, DefaultTolerance, testNow)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Verify(%q, %q) = %v, want ErrMalformed", tc.ts, tc.sig, err)
			}
		})
	}
}

func TestVerifyEmptySecret(t *testing.T) {
	ts := strconv.FormatInt(testTimestamp, 10)
	sig := Sign("", testTimestamp, testBody)
	if err := Verify("", testBody, ts, sig, DefaultTolerance, testNow); !errors.Is(err, ErrEmptySecret) {
		t.Fatalf("Verify = %v, want ErrEmptySecret", err)
	}
}

func TestVerifyRequest(t *testing.T) {
	// VerifyRequest reads the system clock, so sign with the current time.
	now := time.Now().Unix()
	sig := Sign(testSecret, now, testBody)

	r := httptest.NewRequest("POST", "/hook", bytes.NewReader(testBody))
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(now, 10))
	r.Header.Set(HeaderSignature, sig)
	if err := VerifyRequest(testSecret, r, testBody, DefaultTolerance); err != nil {
		t.Fatalf("VerifyRequest = %v", err)
	}

	t.Run("signature split over two header lines", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/hook", bytes.NewReader(testBody))
		r.Header.Set(HeaderTimestamp, strconv.FormatInt(now, 10))
		r.Header.Add(HeaderSignature, Sign("whsec_old", now, testBody))
		r.Header.Add(HeaderSignature, sig)
		if err := VerifyRequest(testSecret, r, testBody, DefaultTolerance); err != nil {
			t.Fatalf("VerifyRequest = %v", err)
		}
	})
	t.Run("headers missing", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/hook", bytes.NewReader(testBody))
		if err := VerifyRequest(testSecret, r, testBody, DefaultTolerance); !errors.Is(err, ErrMalformed) {
			t.Fatalf("VerifyRequest = %v, want ErrMalformed", err)
		}
	})
	t.Run("stale", func(t *testing.T) {
		stale := now - int64((DefaultTolerance + time.Minute).Seconds())
		r := httptest.NewRequest("POST", "/hook", bytes.NewReader(testBody))
		r.Header.Set(HeaderTimestamp, strconv.FormatInt(stale, 10))
		r.Header.Set(HeaderSignature, Sign(testSecret, stale, testBody))
		if err := VerifyRequest(testSecret, r, testBody, DefaultTolerance); !errors.Is(err, ErrTimestampOutsideTolerance) {
			t.Fatalf("VerifyRequest = %v, want ErrTimestampOutsideTolerance", err)
		}
	})
}
