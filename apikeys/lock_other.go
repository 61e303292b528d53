//go:build !unix

package apikeys

import "os"

// lockFile is a no-op where flock is not available: Add and Revoke of one
// key file must then not run at once.
func lockFile(*os.File) error { return nil }
