//go:build !unix

package datadir

import "os"

// tryLock has no advisory lock to take on this platform; Pebble's own
// directory lock still refuses a second process, with a less precise error.
func tryLock(*os.File) (held bool, err error) { return false, nil }
