package webhookdelivery

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"code.dny.dev/ssrf"
)

// URL bounds applied by CheckURL.
const (
	// MaxURLBytes bounds a stored endpoint URL. 2048 bytes is the de-facto
	// limit browsers and proxies accept, far above any real webhook URL.
	MaxURLBytes = 2048
	// maxHostnameBytes is the longest DNS name in presentation form (RFC 1035).
	maxHostnameBytes = 253
	// maxLabelBytes is the longest DNS label (RFC 1035).
	maxLabelBytes = 63
	// minPort and maxPort are the usable TCP ports; 0 is not one.
	minPort = 1
	maxPort = 65535
)

// AllowPrivateHint ends the refusals that --webhook-allow-private lifts, so
// a developer pointing an endpoint at a receiver on their own machine
// (http://localhost:3000) learns what to do.
const AllowPrivateHint = "for a receiver on this machine or a private network during development, " +
	"start rtcd with --webhook-allow-private (RTCD_WEBHOOK_ALLOW_PRIVATE=true); never in production"

// liftedByAllowPrivate adds AllowPrivateHint to a refusal.
func liftedByAllowPrivate(err error) error {
	return fmt.Errorf("%w (%s)", err, AllowPrivateHint)
}

// Errors returned by CheckURL, and recorded by Deliver. Compare with
// errors.Is. Both mean the URL must not be accepted for an endpoint
// (400 invalid_request at creation).
var (
	// ErrInvalidURL means the URL is not an acceptable absolute HTTPS URL:
	// it does not parse, has another scheme, carries userinfo or a
	// fragment, lacks a host, has a bad port or is too long.
	ErrInvalidURL = errors.New("webhooks: invalid destination URL")
	// ErrForbiddenDestination means the URL or a resolved address points at
	// loopback, private, link-local or otherwise non-public space, or spells
	// an IP address in a non-canonical numeric form.
	ErrForbiddenDestination = errors.New("webhooks: forbidden destination")
)

// forbiddenIPv4 lists the IPv4 ranges no delivery may reach. IPv4-mapped
// IPv6 addresses are unmapped before this table is consulted, so
// ::ffff:127.0.0.1 is caught by 127.0.0.0/8.
var forbiddenIPv4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", includes unspecified 0.0.0.0 (RFC 791)
	netip.MustParsePrefix("10.0.0.0/8"),      // private (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT shared space (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback (RFC 1122)
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, incl. cloud metadata 169.254.169.254 (RFC 3927)
	netip.MustParsePrefix("172.16.0.0/12"),   // private (RFC 1918)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast (RFC 7526)
	netip.MustParsePrefix("192.168.0.0/16"),  // private (RFC 1918)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast (RFC 5771)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, incl. broadcast 255.255.255.255 (RFC 1112)
}

// forbiddenIPv6 lists the IPv6 ranges no delivery may reach directly.
var forbiddenIPv6 = []netip.Prefix{
	netip.MustParsePrefix("::/128"),         // unspecified (RFC 4291)
	netip.MustParsePrefix("::1/128"),        // loopback (RFC 4291)
	netip.MustParsePrefix("::/96"),          // IPv4-compatible, deprecated; ::127.0.0.1 and friends (RFC 4291)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64, translates into private networks (RFC 8215)
	netip.MustParsePrefix("100::/64"),       // discard-only (RFC 6666)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation (RFC 3849)
	netip.MustParsePrefix("3fff::/20"),      // documentation (RFC 9637)
	netip.MustParsePrefix("fc00::/7"),       // unique-local (RFC 4193)
	netip.MustParsePrefix("fe80::/10"),      // link-local (RFC 4291)
	netip.MustParsePrefix("fec0::/10"),      // site-local, deprecated (RFC 3879)
	netip.MustParsePrefix("ff00::/8"),       // multicast (RFC 4291)
}

// IPv6 ranges that carry an IPv4 address inside them. A packet sent there is
// delivered to that IPv4 address by a translator or tunnel, so the embedded
// address must pass the IPv4 policy too.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 (RFC 6052): v4 in the last 32 bits
	sixToFour    = netip.MustParsePrefix("2002::/16")    // 6to4 (RFC 3056): v4 in bits 16-47
	teredoPrefix = netip.MustParsePrefix("2001::/32")    // Teredo (RFC 4380): server v4 in bits 32-63, client v4 inverted in bits 96-127
)

// ssrfGuard is code.dny.dev/ssrf's table of IANA special-purpose ranges,
// consulted in addition to ours so that anything it denies is denied here
// too. Ports and networks are not its business here: CheckURL checks ports
// and the dialer only dials TCP.
var ssrfGuard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// ForbiddenIP reports whether a delivery must never connect to ip.
//
// It is true for: invalid addresses; addresses with an IPv6 zone (zones only
// exist for non-global scopes); loopback, private (10/8, 172.16/12,
// 192.168/16), link-local (169.254/16, fe80::/10), unique-local (fc00::/7),
// site-local (fec0::/10), carrier-grade NAT (100.64/10), multicast
// (224/4, ff00::/8), unspecified (0.0.0.0, ::), 0.0.0.0/8, broadcast and
// reserved (240/4), benchmarking (198.18/15), IETF protocol assignments
// (192.0.0/24), documentation (192.0.2/24, 198.51.100/24, 203.0.113/24,
// 2001:db8::/32, 3fff::/20), discard (100::/64), local-use NAT64
// (64:ff9b:1::/48), IPv4-compatible IPv6 (::/96); IPv4-mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::/96), 6to4 (2002::/16) and Teredo
// (2001::/32) addresses whose embedded IPv4 address is forbidden; and
// everything code.dny.dev/ssrf denies.
//
// The last rule is the strictest: ssrf denies every IPv6 address outside
// global unicast 2000::/3 and all of 2001::/23 and 2002::/16, so in practice
// every NAT64, 6to4 and Teredo address is refused, whatever it embeds.
// Receivers reachable only through such translation are not supported; the
// embedding rules remain so that this policy does not depend on the
// library's table alone.
func ForbiddenIP(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return true
	}
	// An IPv4-mapped address is dialled as the IPv4 address it maps, so it
	// is judged as that address, by both tables.
	ip = ip.Unmap()
	if forbiddenByTable(ip) {
		return true
	}
	return ssrfGuard.SafeAddr(ip) != nil
}

// forbiddenByTable applies this package's own tables to an unmapped,
// zone-free address.
func forbiddenByTable(ip netip.Addr) bool {
	if ip.Is4() {
		return inAny(forbiddenIPv4, ip)
	}
	if inAny(forbiddenIPv6, ip) {
		return true
	}
	for _, embedded := range embeddedIPv4(ip) {
		if inAny(forbiddenIPv4, embedded) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 addresses a NAT64, 6to4 or Teredo address
// forwards to, or nothing for other addresses.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	b := ip.As16()
	switch {
	case nat64Prefix.Contains(ip):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})}
	case sixToFour.Contains(ip):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}
	case teredoPrefix.Contains(ip):
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		// The client address is stored with every bit inverted (RFC 4380).
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}
	}
	return nil
}

func inAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forbiddenNameSuffixes are DNS suffixes that public DNS never serves: names
// under them are answered, if at all, by the local host, the local network
// or a private (split-horizon) zone, so they can only lead inside.
var forbiddenNameSuffixes = []string{
	".localhost",   // the local host (RFC 6761)
	".local",       // multicast DNS on the local link (RFC 6762)
	".localdomain", // conventional name of the local host's domain
	".internal",    // reserved for private use (ICANN, 2024); e.g. metadata.google.internal
	".intranet",    // common private zone
	".lan",         // common home-router zone
	".home",        // common home-router zone
	".corp",        // common private zone
	".private",     // common private zone
	".arpa",        // infrastructure names: reverse lookups, home.arpa residential networks (RFC 8375)
	".onion",       // Tor hidden services, not reachable through DNS (RFC 7686)
}

// CheckURL validates raw as a webhook destination and returns it parsed.
//
// The URL must be absolute, at most MaxURLBytes long, https (http only when
// allowPrivate), without userinfo or fragment, with a host and, if a port is
// given, a decimal port in 1..65535 without leading zeros.
//
// The host is then judged:
//   - An IPv6 literal must not be ForbiddenIP (covers ::1, ::ffff:127.0.0.1,
//     ::ffff:7f00:1, NAT64, 6to4, Teredo, zones...).
//   - A host whose last label is numeric (all decimal digits, or 0x
//     followed by hex digits) is an IPv4 address to browsers and to
//     inet_aton. Only the canonical dotted-quad form is accepted, and it
//     must not be ForbiddenIP. Every other numeric spelling (2130706433,
//     0177.0.0.1, 0x7f.0.0.1, 127.1, 127.000.000.001, mixed forms) is
//     refused whatever address it denotes: different parsers disagree on
//     such forms, and no legitimate receiver needs them.
//   - A name must be ASCII letters, digits, hyphens and underscores in
//     labels of 1..63 bytes (internationalised names in their xn-- form),
//     at most 253 bytes, contain a dot (single-label names resolve through
//     the search path to internal hosts), and be neither "localhost" nor
//     end in one of the forbiddenNameSuffixes: .localhost, .local,
//     .localdomain, .internal, .intranet, .lan, .home, .corp, .private,
//     .arpa (incl. .home.arpa), .onion. One trailing dot is ignored.
//
// With allowPrivate the address and name rules are skipped (plain http is
// accepted too) but the syntax rules and the refusal of non-canonical numeric
// hosts still apply. A name that passes can still resolve to a forbidden
// address; the delivery client checks that when it connects.
func CheckURL(raw string, allowPrivate bool) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	if len(raw) > MaxURLBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidURL, MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return nil, liftedByAllowPrivate(fmt.Errorf("%w: https is required", ErrInvalidURL))
		}
	default:
		return nil, fmt.Errorf("%w: scheme must be https", ErrInvalidURL)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: not an absolute URL with a host", ErrInvalidURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: userinfo is not allowed", ErrInvalidURL)
	}
	// Checked on the raw text because url.Parse reports "#" with an empty
	// fragment the same as no fragment.
	if strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: fragment is not allowed", ErrInvalidURL)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: missing host", ErrInvalidURL)
	}
	if err := checkPort(u); err != nil {
		return nil, err
	}
	if err := checkHost(host, allowPrivate); err != nil {
		return nil, err
	}
	return u, nil
}

// checkPort accepts no port, or a canonical decimal port in minPort..maxPort.
func checkPort(u *url.URL) error {
	port := u.Port()
	if port == "" {
		// url.Parse accepts "host:" with an empty port; refuse it rather
		// than guess what was meant.
		if strings.HasSuffix(u.Host, ":") {
			return fmt.Errorf("%w: empty port", ErrInvalidURL)
		}
		return nil
	}
	if port[0] == '0' {
		return fmt.Errorf("%w: port %q has a leading zero", ErrInvalidURL, port)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < minPort || n > maxPort {
		return fmt.Errorf("%w: port %q outside %d..%d", ErrInvalidURL, port, minPort, maxPort)
	}
	return nil
}

// checkHost applies the host rules documented on CheckURL.
func checkHost(host string, allowPrivate bool) error {
	// Hostname has already removed the brackets of an IPv6 literal; only
	// IPv6 literals contain a colon.
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%w: bad IPv6 literal: %v", ErrInvalidURL, err)
		}
		if !allowPrivate && ForbiddenIP(ip) {
			return liftedByAllowPrivate(fmt.Errorf("%w: %s", ErrForbiddenDestination, host))
		}
		return nil
	}

	name := strings.ToLower(host)
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > maxHostnameBytes {
		return fmt.Errorf("%w: bad host name length", ErrInvalidURL)
	}
	labels := strings.Split(name, ".")
	for _, label := range labels {
		if !validLabel(label) {
			return fmt.Errorf("%w: bad host name %q", ErrInvalidURL, host)
		}
	}

	if isNumericLabel(labels[len(labels)-1]) {
		// netip.ParseAddr accepts exactly the canonical dotted quad: four
		// decimal parts, no leading zeros, no hex, no short forms.
		ip, err := netip.ParseAddr(name)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("%w: non-canonical IPv4 address %q", ErrForbiddenDestination, host)
		}
		if !allowPrivate && ForbiddenIP(ip) {
			return liftedByAllowPrivate(fmt.Errorf("%w: %s", ErrForbiddenDestination, host))
		}
		return nil
	}

	if allowPrivate {
		return nil
	}
	if len(labels) < 2 {
		return liftedByAllowPrivate(fmt.Errorf("%w: single-label host name %q", ErrForbiddenDestination, host))
	}
	if name == "localhost" {
		return liftedByAllowPrivate(fmt.Errorf("%w: %s", ErrForbiddenDestination, host))
	}
	for _, suffix := range forbiddenNameSuffixes {
		if strings.HasSuffix(name, suffix) {
			return liftedByAllowPrivate(fmt.Errorf("%w: %s is an internal name (%s)", ErrForbiddenDestination, host, suffix))
		}
	}
	return nil
}

// validLabel accepts 1..maxLabelBytes of ASCII letters, digits, hyphen and
// underscore. Anything else, notably non-ASCII (including full-width digits
// that some resolvers fold to ASCII), is refused.
func validLabel(label string) bool {
	if label == "" || len(label) > maxLabelBytes {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// isNumericLabel reports whether a (lowercased) label is a number in the
// sense of the WHATWG URL "ends in a number" rule: all decimal digits, or
// "0x" followed by zero or more hex digits.
func isNumericLabel(label string) bool {
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return false
		}
	}
	return label != ""
}
