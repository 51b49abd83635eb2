// Package rendezvous owns the score of rendezvous (highest random weight)
// hashing, shared by the cluster's placement of workspaces over members
// and the choice of a media node for a room: the member with the highest
// Score of (key, member) owns key.
package rendezvous

import "hash/fnv"

// Score is member's weight for key.
func Score(key, member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	return mix64(h.Sum64())
}

// mix64 is murmur3's 64-bit finaliser: FNV-1a alone spreads rendezvous
// scores unevenly (with 5 members, owners of 100,000 ids ranged from 17.8k
// to 22.5k); mixed, each gets its share.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
