// Package scopes owns the complete list of API key scopes and their compact
// set representation. docs/api.md lists which scope each route needs.
package scopes

import "strings"

// Scope is one permission bit.
type Scope uint32

// Set is a set of scopes.
type Set uint32

// The complete list of scopes. The order fixes the bit positions, which are
// persisted: append new scopes at the end, never reorder.
const (
	RoomsRead Scope = 1 << iota
	RoomsWrite
	ParticipantsRead
	ParticipantsWrite
	UsageRead
	BillingRead
	BillingWrite
	APIKeysRead
	APIKeysWrite
	WebhooksRead
	WebhooksWrite
	ProjectRead
	AuditLogsRead
)

var names = []struct {
	scope Scope
	name  string
}{
	{RoomsRead, "rooms:read"},
	{RoomsWrite, "rooms:write"},
	{ParticipantsRead, "participants:read"},
	{ParticipantsWrite, "participants:write"},
	{UsageRead, "usage:read"},
	{BillingRead, "billing:read"},
	{BillingWrite, "billing:write"},
	{APIKeysRead, "api_keys:read"},
	{APIKeysWrite, "api_keys:write"},
	{WebhooksRead, "webhooks:read"},
	{WebhooksWrite, "webhooks:write"},
	{ProjectRead, "project:read"},
	{AuditLogsRead, "audit_logs:read"},
}

// MaxScopesPerKey bounds the scopes array of a key creation request. It is
// the number of scopes that exist: a longer list must repeat one.
var MaxScopesPerKey = len(names)

// All holds every scope.
var All = func() Set {
	var s Set
	for _, n := range names {
		s |= Set(n.scope)
	}
	return s
}()

// Parse returns the scope named name.
func Parse(name string) (Scope, bool) {
	for _, n := range names {
		if n.name == name {
			return n.scope, true
		}
	}
	return 0, false
}

// Name returns the public name of s.
func (s Scope) Name() string {
	for _, n := range names {
		if n.scope == s {
			return n.name
		}
	}
	return ""
}

// Has reports whether the set holds s.
func (set Set) Has(s Scope) bool { return set&Set(s) != 0 }

// Contains reports whether every scope of other is in set.
func (set Set) Contains(other Set) bool { return set&other == other }

// Names lists the scopes of set in the canonical order.
func (set Set) Names() []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if set.Has(n.scope) {
			out = append(out, n.name)
		}
	}
	return out
}

// String is the comma-separated list of names.
func (set Set) String() string { return strings.Join(set.Names(), ",") }
