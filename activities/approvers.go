package activities

import (
	"context"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// OpenApprovalInput names the claim an approval opens for.
type OpenApprovalInput struct {
	ClaimID string `json:"claim_id"`
}

// OpenApprovalResult is the approver directory as it stands when the
// approval opens, keys included: recorded in history, it is what the
// workflow checks every decision and every receipt's signature against.
type OpenApprovalResult struct {
	Approvers authority.Directory `json:"approvers"`
	// Services are the keys allowed to vouch for any approver.
	Services []authority.Service `json:"services,omitempty"`
	Meta
}

// OpenApproval reads the approver directory for a new approval request of
// the run that owns the claim: who may decide, their limits, addresses and
// keys are the insurer's, not anyone's who asks.
func (a *Activities) OpenApproval(ctx context.Context, in OpenApprovalInput) (OpenApprovalResult, error) {
	if _, _, err := a.forClaim(ctx, in.ClaimID); err != nil {
		return OpenApprovalResult{}, err
	}
	d, err := authority.Load(a.ApproversFile)
	if err != nil {
		// Retryable: fixing the file lets the claim carry on.
		return OpenApprovalResult{}, err
	}
	return OpenApprovalResult{Approvers: d.Approvers, Services: d.Services, Meta: meta(ctx)}, nil
}
