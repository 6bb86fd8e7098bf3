// Package unitguard keeps `make unit` what it says: the tests that start
// no server, database, S3 store or browser. make unit sets
// UNIT_STARTS_NOTHING=1, and every helper of the rig that starts one asks
// Refuse first, so a test that would start one under make unit fails at
// once, naming what it would have started, instead of quietly slowing the
// quick loop or failing on a machine without the server. Such a test
// belongs to make test alone: in a file built only without the unit tag
// (//go:build !unit, as deploy/archival_test.go is), or in a package make
// unit leaves out (e2e, testbed/cluster, testbed/rollout).
package unitguard

import (
	"fmt"
	"os"
)

// Env is the variable make unit sets.
const Env = "UNIT_STARTS_NOTHING"

// Refuse says why what must not start under make unit, or nil when the
// tests are not make unit's.
func Refuse(what string) error {
	if os.Getenv(Env) == "" {
		return nil
	}
	return fmt.Errorf("%s: make unit starts nothing (%s is set), and this test would start it: "+
		"it belongs to make test alone (a file built with //go:build !unit, or a package make unit leaves out)", what, Env)
}
