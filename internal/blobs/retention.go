package blobs

import "time"

// retention is the hook that puts a record under the bucket's retention
// (none on a file:// store, which has no such thing).
func (s *Store) retention(retainUntil time.Time) func(func(any) bool) error {
	_ = retainUntil
	return nil
}
