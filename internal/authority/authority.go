// Package authority is the approver directory: who may decide claims, in
// which role, up to which amount. It is data, read by an activity and
// recorded in history when an approval opens, so the rules that check a
// decision are deterministic workflow code.
package authority

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	_ "embed"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Role is what an approver may do.
type Role string

const (
	// Adjuster decides claims while they wait, up to their limit.
	Adjuster Role = "adjuster"
	// Supervisor decides at any stage, including escalated claims.
	Supervisor Role = "supervisor"
)

// Approver is one entry of the directory.
type Approver struct {
	ID    string `json:"id"`
	Role  Role   `json:"role"`
	Email string `json:"email"`
	// Limits is the largest amount the approver may approve, per currency,
	// in minor units. No entry for a currency means no authority in it.
	Limits map[string]int64 `json:"limits_minor"`
}

// Directory is the approver list, sorted by ID so its JSON is stable.
type Directory []Approver

// Find returns the approver with id.
func (d Directory) Find(id string) (Approver, bool) {
	i := sort.Search(len(d), func(i int) bool { return d[i].ID >= id })
	if i < len(d) && d[i].ID == id {
		return d[i], true
	}
	return Approver{}, false
}

type file struct {
	Approvers []struct {
		ID     string            `json:"id"`
		Role   Role              `json:"role"`
		Email  string            `json:"email"`
		Limits map[string]string `json:"limits"`
	} `json:"approvers"`
}

// Parse reads a directory file:
//
//	{"approvers":[{"id":"adjuster-17","role":"adjuster","email":"…","limits":{"usd":"5000.00"}}]}
func Parse(data []byte) (Directory, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("approvers: %w", err)
	}
	d := make(Directory, 0, len(f.Approvers))
	seen := map[string]bool{}
	for i, a := range f.Approvers {
		where := fmt.Sprintf("approvers[%d] (%s)", i, a.ID)
		switch {
		case a.ID == "" || len(a.ID) > 128:
			return nil, fmt.Errorf("%s: id must be 1 to 128 characters", where)
		case seen[a.ID]:
			return nil, fmt.Errorf("%s: listed twice", where)
		case a.Role != Adjuster && a.Role != Supervisor:
			return nil, fmt.Errorf("%s: role must be %q or %q", where, Adjuster, Supervisor)
		case len(a.Limits) == 0:
			return nil, fmt.Errorf("%s: needs limits, e.g. {\"usd\":\"5000.00\"}", where)
		}
		seen[a.ID] = true
		ap := Approver{ID: a.ID, Role: a.Role, Email: strings.ToLower(a.Email), Limits: map[string]int64{}}
		for cur, v := range a.Limits {
			minor, err := claim.ParseAmount(v, strings.ToLower(cur))
			if err != nil {
				return nil, fmt.Errorf("%s: limits.%s: %w", where, cur, err)
			}
			ap.Limits[strings.ToLower(cur)] = minor
		}
		d = append(d, ap)
	}
	sort.Slice(d, func(i, j int) bool { return d[i].ID < d[j].ID })
	return d, nil
}

//go:embed approvers.json
var sample []byte

// Load reads the directory at path, or the sample (the approvers the demo
// and examples use) when path is empty.
func Load(path string) (Directory, error) {
	data := sample
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("approvers: %w", err)
		}
	}
	return Parse(data)
}
