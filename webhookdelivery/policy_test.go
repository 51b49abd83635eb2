package webhookdelivery

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestCheckURLRefusesForbiddenDestinations is the table of destinations the
// production setting (allowPrivate=false) must refuse.
func TestCheckURLRefusesForbiddenDestinations(t *testing.T) {
	cases := []struct {
		url  string
		want error
	}{
		// Loopback and local names.
		{"https://127.0.0.1/", ErrForbiddenDestination},
		{"https://127.0.0.1:8443/hook", ErrForbiddenDestination},
		{"https://127.255.255.254/", ErrForbiddenDestination},
		{"https://127.0.0.1.:443/", ErrForbiddenDestination},
		{"https://localhost/", ErrForbiddenDestination},
		{"https://LOCALHOST./", ErrForbiddenDestination},
		{"https://api.localhost/", ErrForbiddenDestination},
		{"https://printer.local/", ErrForbiddenDestination},
		{"https://metadata.google.internal/computeMetadata/v1/", ErrForbiddenDestination},
		{"https://db.localdomain/", ErrForbiddenDestination},
		{"https://router.home.arpa/", ErrForbiddenDestination},
		{"https://1.0.0.127.in-addr.arpa/", ErrForbiddenDestination},
		{"https://nas.lan/", ErrForbiddenDestination},
		{"https://intranet/", ErrForbiddenDestination},
		{"https://metadata/", ErrForbiddenDestination},
		// Private, shared, link-local and special IPv4 ranges.
		{"https://10.0.0.1/", ErrForbiddenDestination},
		{"https://172.16.0.1/", ErrForbiddenDestination},
		{"https://172.31.255.255/", ErrForbiddenDestination},
		{"https://192.168.1.1/", ErrForbiddenDestination},
		{"https://169.254.169.254/latest/meta-data/", ErrForbiddenDestination},
		{"https://100.64.0.1/", ErrForbiddenDestination},
		{"https://0.0.0.0/", ErrForbiddenDestination},
		{"https://0.1.2.3/", ErrForbiddenDestination},
		{"https://224.0.0.1/", ErrForbiddenDestination},
		{"https://239.255.255.250/", ErrForbiddenDestination},
		{"https://255.255.255.255/", ErrForbiddenDestination},
		{"https://240.0.0.1/", ErrForbiddenDestination},
		{"https://198.18.0.1/", ErrForbiddenDestination},
		{"https://198.19.255.1/", ErrForbiddenDestination},
		{"https://192.0.2.1/", ErrForbiddenDestination},
		{"https://198.51.100.7/", ErrForbiddenDestination},
		{"https://203.0.113.9/", ErrForbiddenDestination},
		{"https://192.0.0.8/", ErrForbiddenDestination},
		// Numeric tricks: decimal, octal, hex, short, mixed, zero-padded.
		{"https://2130706433/", ErrForbiddenDestination},
		{"https://0/", ErrForbiddenDestination},
		{"https://017700000001/", ErrForbiddenDestination},
		{"https://0177.0.0.1/", ErrForbiddenDestination},
		{"https://0x7f.0.0.1/", ErrForbiddenDestination},
		{"https://0X7F.0.0.1/", ErrForbiddenDestination},
		{"https://0x7f000001/", ErrForbiddenDestination},
		{"https://127.1/", ErrForbiddenDestination},
		{"https://10.1/", ErrForbiddenDestination},
		{"https://10.0.1/", ErrForbiddenDestination},
		{"https://0x7f.1/", ErrForbiddenDestination},
		{"https://0177.0x0.1/", ErrForbiddenDestination},
		{"https://0x0a.0x00.0x00.0x01/", ErrForbiddenDestination},
		{"https://127.000.000.001/", ErrForbiddenDestination},
		{"https://010.0.0.1/", ErrForbiddenDestination},
		{"https://3232235777/", ErrForbiddenDestination}, // 192.168.1.1
		{"https://0x/", ErrForbiddenDestination},
		{"https://1.2.3.4.5/", ErrForbiddenDestination},
		{"https://999.1.1.1/", ErrForbiddenDestination},
		// IPv6 literals, including IPv4-mapped and -compatible forms.
		{"https://[::1]/", ErrForbiddenDestination},
		{"https://[0000:0000:0000:0000:0000:0000:0000:0001]/", ErrForbiddenDestination},
		{"https://[::]/", ErrForbiddenDestination},
		{"https://[::ffff:127.0.0.1]/", ErrForbiddenDestination},
		{"https://[::ffff:7f00:1]/", ErrForbiddenDestination},
		{"https://[0:0:0:0:0:ffff:7f00:1]/", ErrForbiddenDestination},
		{"https://[::ffff:10.0.0.1]/", ErrForbiddenDestination},
		{"https://[::ffff:a9fe:a9fe]/", ErrForbiddenDestination}, // 169.254.169.254
		{"https://[::ffff:0.0.0.0]/", ErrForbiddenDestination},
		{"https://[::127.0.0.1]/", ErrForbiddenDestination},
		{"https://[::8.8.8.8]/", ErrForbiddenDestination}, // IPv4-compatible is deprecated outright
		// NAT64, 6to4 and Teredo embedding private IPv4.
		{"https://[64:ff9b::127.0.0.1]/", ErrForbiddenDestination},
		{"https://[64:ff9b::a00:1]/", ErrForbiddenDestination},
		{"https://[64:ff9b::c0a8:101]/", ErrForbiddenDestination},
		{"https://[64:ff9b:1::8.8.8.8]/", ErrForbiddenDestination},
		{"https://[2002:7f00:1::]/", ErrForbiddenDestination},
		{"https://[2002:c0a8:101::1]/", ErrForbiddenDestination},
		{"https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", ErrForbiddenDestination}, // Teredo, client 127.0.0.1
		// Other IPv6 ranges.
		{"https://[fe80::1]/", ErrForbiddenDestination},
		{"https://[fe80::1%25eth0]/", ErrForbiddenDestination},
		{"https://[fc00::1]/", ErrForbiddenDestination},
		{"https://[fd12:3456:789a::1]/", ErrForbiddenDestination},
		{"https://[fec0::1]/", ErrForbiddenDestination},
		{"https://[ff02::1]/", ErrForbiddenDestination},
		{"https://[2001:db8::1]/", ErrForbiddenDestination},
		{"https://[100::1]/", ErrForbiddenDestination},
		// Syntax and scheme rules.
		{"http://example.com/hook", ErrInvalidURL},
		{"ftp://example.com/hook", ErrInvalidURL},
		{"javascript:alert(1)", ErrInvalidURL},
		{"https:example.com", ErrInvalidURL},
		{"//example.com/hook", ErrInvalidURL},
		{"https:///hook", ErrInvalidURL},
		{"https://user:pass@example.com/", ErrInvalidURL},
		{"https://user@example.com/", ErrInvalidURL},
		{"https://example.com\\@127.0.0.1/", ErrInvalidURL},
		{"https://example.com/hook#frag", ErrInvalidURL},
		{"https://example.com/hook#", ErrInvalidURL},
		{"https://example.com:0/", ErrInvalidURL},
		{"https://example.com:65536/", ErrInvalidURL},
		{"https://example.com:99999/", ErrInvalidURL},
		{"https://example.com:0443/", ErrInvalidURL},
		{"https://example.com:/", ErrInvalidURL},
		{"https://%31%32%37.0.0.1/", ErrInvalidURL},
		{"https://１２７.０.０.１/", ErrInvalidURL},
		{"https://exa mple.com/", ErrInvalidURL},
		{"https://example..com/", ErrInvalidURL},
		{"https://" + strings.Repeat("a", 64) + ".com/", ErrInvalidURL},
		{"https://example.com/" + strings.Repeat("a", MaxURLBytes), ErrInvalidURL},
		{"", ErrInvalidURL},
	}
	if len(cases) < 40 {
		t.Fatalf("the table must hold at least 40 destinations, has %d", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			u, err := CheckURL(tc.url, false)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckURL(%q) = %v, %v; want %v", tc.url, u, err, tc.want)
			}
		})
	}
}

func TestCheckURLAllowsPublicDestinations(t *testing.T) {
	for _, raw := range []string{
		"https://example.com",
		"https://example.com/",
		"https://EXAMPLE.com./hooks/rtc?source=rtcd&v=1",
		"https://93.184.216.34/hook",
		"https://1.1.1.1:8443/hook",
		"https://hooks.sub.example.co.uk:443/a/b",
		"https://xn--bcher-kva.example/hook",
		"https://my_host.example.com/",
		"https://[2606:2800:220:1:248:1893:25c8:1946]/hook",
		"https://[::ffff:93.184.216.34]/hook", // mapped public IPv4 is that IPv4 address
		"https://evil.test/hook",              // resolution is the dialer's job
		"https://example.com:65535/",
	} {
		if _, err := CheckURL(raw, false); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", raw, err)
		}
	}
}

func TestCheckURLAllowPrivate(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:8080/hook",
		"https://127.0.0.1:8443/hook",
		"https://[::1]:8443/hook",
		"http://localhost:8080/hook",
		"https://receiver/hook",
		"https://10.0.0.5/hook",
	} {
		if _, err := CheckURL(raw, true); err != nil {
			t.Errorf("CheckURL(%q, allowPrivate) = %v, want nil", raw, err)
		}
	}
	// Syntax rules and non-canonical numbers stay refused even for testing.
	for _, raw := range []string{
		"http://2130706433/hook",
		"http://0x7f.0.0.1/hook",
		"http://user:pw@127.0.0.1/hook",
		"http://127.0.0.1/hook#x",
		"ftp://127.0.0.1/",
	} {
		if _, err := CheckURL(raw, true); err == nil {
			t.Errorf("CheckURL(%q, allowPrivate) = nil, want an error", raw)
		}
	}
}

func TestForbiddenIP(t *testing.T) {
	forbidden := []string{
		"127.0.0.1", "10.255.255.255", "172.16.0.0", "172.31.0.1", "192.168.0.1",
		"169.254.0.1", "100.64.0.0", "100.127.255.255", "0.0.0.0", "0.255.255.255",
		"224.0.0.251", "255.255.255.255", "240.0.0.0", "198.18.0.0", "198.19.255.255",
		"192.0.2.0", "198.51.100.255", "203.0.113.1", "192.0.0.170", "192.88.99.1",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:192.168.0.1", "::127.0.0.1",
		"fe80::1", "febf::1", "fec0::1", "fc00::", "fdff:ffff::1", "ff02::1", "ff0e::1",
		"2001:db8::", "3fff::1", "100::1",
		"64:ff9b::7f00:1", "64:ff9b::10.1.2.3", "64:ff9b:1::1",
		"2002:a00:1::1", "2002:7f00:1::1",
		"2001:0:4136:e378:8000:63bf:80ff:fffe",
		"fe80::1%eth0", "2606:4700::1111%eth0",
	}
	for _, s := range forbidden {
		if ip := netip.MustParseAddr(s); !ForbiddenIP(ip) {
			t.Errorf("ForbiddenIP(%s) = false, want true", s)
		}
	}
	if !ForbiddenIP(netip.Addr{}) {
		t.Errorf("ForbiddenIP(zero Addr) = false, want true")
	}

	allowed := []string{
		"93.184.216.34", "8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.0",
		"100.63.255.255", "100.128.0.0", "192.169.0.1", "198.17.255.255", "198.20.0.0",
		"223.255.255.255", "::ffff:8.8.8.8",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
	}
	for _, s := range allowed {
		if ip := netip.MustParseAddr(s); ForbiddenIP(ip) {
			t.Errorf("ForbiddenIP(%s) = true, want false", s)
		}
	}
}

// TestEmbeddedIPv4Rules checks this package's own embedding rules on their
// own, since code.dny.dev/ssrf refuses these whole ranges and would hide a
// mistake in them.
func TestEmbeddedIPv4Rules(t *testing.T) {
	cases := []struct {
		ip   string
		want bool
	}{
		{"64:ff9b::7f00:1", true},
		{"64:ff9b::c0a8:101", true},
		{"64:ff9b::808:808", false},
		{"2002:7f00:1::1", true},
		{"2002:a9fe:a9fe::1", true},
		{"2002:808:808::1", false},
		// Teredo: server 65.54.227.120, client ~80ff:fffe = 127.0.0.1.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", true},
		// Teredo: server 10.0.0.1.
		{"2001:0:a00:1:8000:63bf:f7f7:f7f7", true},
		// Teredo: server 65.54.227.120, client ~f7f7:f7f7 = 8.8.8.8.
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", false},
	}
	for _, tc := range cases {
		if got := forbiddenByTable(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("forbiddenByTable(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
	// With code.dny.dev/ssrf consulted too, all translation ranges are
	// refused, whatever they embed.
	for _, s := range []string{"64:ff9b::808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"} {
		if !ForbiddenIP(netip.MustParseAddr(s)) {
			t.Errorf("ForbiddenIP(%s) = false, want true", s)
		}
	}
}

// TestCheckURLNamesTheDevelopmentSetting: a refusal that
// --webhook-allow-private lifts says so, so a developer whose receiver runs
// on their own machine learns what to do; a refusal it does not lift never
// suggests it.
func TestCheckURLNamesTheDevelopmentSetting(t *testing.T) {
	for _, raw := range []string{
		"http://localhost:3000/hook", "http://example.com/hook", "https://localhost/hook",
		"https://127.0.0.1:3000/hook", "https://[::1]/hook", "https://intranet/hook",
		"https://metadata.google.internal/", "https://printer.local/",
	} {
		if _, err := CheckURL(raw, false); err == nil || !strings.Contains(err.Error(), "--webhook-allow-private") {
			t.Errorf("CheckURL(%q) = %v; want the refusal to name --webhook-allow-private", raw, err)
		}
		if _, err := CheckURL(raw, true); err != nil {
			t.Errorf("CheckURL(%q, allowPrivate) = %v; the setting the message names must lift it", raw, err)
		}
	}
	for _, raw := range []string{"https://2130706433/", "ftp://example.com/", "https://u:p@example.com/", "https://example.com/#x"} {
		if _, err := CheckURL(raw, false); err == nil || strings.Contains(err.Error(), "allow-private") {
			t.Errorf("CheckURL(%q) = %v; want a refusal that does not suggest --webhook-allow-private", raw, err)
		}
	}
}
