package activities

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// samplePolicies is the policy book used when POLICIES_FILE is unset: the
// policies the example claims refer to.
//
//go:embed policies.json
var samplePolicies []byte

// LoadPolicies reads the policy book from path, or the sample when path is
// empty.
func LoadPolicies(path string) (map[string]claim.Policy, error) {
	data := samplePolicies
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("policies: %w", err)
		}
	}
	return claim.ParsePolicies(data)
}
