package blobs

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
)

// Lock modes for records on S3 (CLAIM_FILE_LOCK): under COMPLIANCE nobody,
// the bucket's owner included, deletes a version or shortens its retention
// before it ends; under GOVERNANCE a user with s3:BypassGovernanceRetention
// may. Empty: no lock (a file:// store has none).
const (
	LockCompliance = "COMPLIANCE"
	LockGovernance = "GOVERNANCE"
)

// ParseLockMode reads CLAIM_FILE_LOCK.
func ParseLockMode(s string) (string, error) {
	switch m := strings.ToUpper(strings.TrimSpace(s)); m {
	case "", LockCompliance, LockGovernance:
		return m, nil
	default:
		return "", fmt.Errorf("CLAIM_FILE_LOCK=%q: want COMPLIANCE, GOVERNANCE or nothing", s)
	}
}

// retention is the hook that puts a record under the bucket's Object Lock
// until retainUntil (S3's upload input, as gocloud's s3blob exposes it). A
// lock asked of a store that is not S3 is an error, not a silent no-op.
func (s *Store) retention(retainUntil time.Time) func(func(any) bool) error {
	if s.LockMode == "" {
		return nil
	}
	return func(as func(any) bool) error {
		var in *transfermanager.UploadObjectInput
		if !as(&in) {
			return fmt.Errorf("blob store %s: CLAIM_FILE_LOCK=%s needs an S3 bucket with Object Lock", redact(s.base), s.LockMode)
		}
		until := retainUntil.UTC()
		in.ObjectLockMode = tmtypes.ObjectLockMode(s.LockMode)
		in.ObjectLockRetainUntilDate = &until
		in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmSha256 // S3 requires a checksum on a locked put
		return nil
	}
}
