package whatif

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/workflows"
)

func reportRoute(r string, payout int64, reasons ...string) workflows.Route {
	return workflows.Route{Route: r, PayoutMinor: payout, Reasons: reasons}
}

func reportUsage(calls int, cost int64, latency time.Duration) Usage {
	return Usage{Model: "recorded-model", PromptVersion: "v1", Calls: calls, TokensIn: 100, TokensOut: 20,
		CostMicros: cost, Latency: latency, LatencyKnown: latency > 0}
}

// reportRows are a what-if's rows, out of order: a dangerous claim (a
// human lowered it then, the candidate would auto-approve it), a changed
// payout, a claim now sent to a human, a USD claim now rejected, an
// unchanged claim and one not evaluated.
func reportRows() []Row {
	nowUsage := Usage{Model: "cand-model", PromptVersion: "p2", Calls: 2, TokensIn: 200, TokensOut: 40, CostMicros: 5000,
		Latency: time.Second, LatencyKnown: true}
	return []Row{
		{ClaimID: "c-error", Error: "not evaluated: no claim file"},
		{ClaimID: "c-same", Outcome: "paid", Currency: "eur", PaidThenMinor: 20000, PayoutNowMinor: 20000,
			Then: Side{Route: reportRoute(workflows.RouteAutoApprove, 20000), Usage: reportUsage(2, 4000, 3*time.Second)},
			Now:  Side{Route: reportRoute(workflows.RouteAutoApprove, 20000), Usage: nowUsage}},
		{ClaimID: "c-usd", Outcome: "paid", Currency: "usd", PaidThenMinor: 10000, Changed: true,
			Then: Side{Route: reportRoute(workflows.RouteAutoApprove, 10000)},
			Now:  Side{Route: workflows.Route{Route: workflows.RouteReject, Reason: "not covered"}, Usage: nowUsage}},
		{ClaimID: "c-human", Outcome: "paid", Currency: "eur", PaidThenMinor: 30000, PayoutNowMinor: 30000, Changed: true,
			ReasonsAdded: []string{"fraud score above 70"},
			Then:         Side{Route: reportRoute(workflows.RouteAutoApprove, 30000), Usage: reportUsage(2, 2000, time.Second)},
			Now: Side{Route: reportRoute(workflows.RouteHuman, 30000, "fraud score above 70"), Usage: nowUsage,
				Tools: []ToolAnswer{{Name: "prior_claims", Source: SourceLive}, {Name: "flag_fraud_signal", Source: SourceSimulated}}}},
		{ClaimID: "c-changed", Outcome: "paid", Currency: "eur", PaidThenMinor: 50000, PayoutNowMinor: 45000, Changed: true,
			Then: Side{Route: reportRoute(workflows.RouteAutoApprove, 50000), Usage: reportUsage(2, 3000, 0)},
			Now:  Side{Route: reportRoute(workflows.RouteAutoApprove, 45000), Usage: nowUsage}},
		{ClaimID: "c-danger", Outcome: "paid", Currency: "eur", PaidThenMinor: 80000, PayoutNowMinor: 120000, Changed: true, Dangerous: true,
			Human: &Human{Reasons: []string{"above the auto-approve limit"}, RequestedMinor: 120000, Verdict: approvals.Approve,
				ApprovedMinor: 80000, Lowered: true, Approvers: []string{"ann"}},
			ReasonsDropped: []string{"above the auto-approve limit"},
			Then: Side{Route: reportRoute(workflows.RouteHuman, 120000, "above the auto-approve limit"), Usage: reportUsage(2, 1000, 2*time.Second),
				Assessment: &activities.Assessment{RecommendedMinor: 120000, Rationale: "receipts | invoice\nmatch the claim"}},
			Now: Side{Route: reportRoute(workflows.RouteAutoApprove, 120000), Usage: nowUsage,
				Assessment: &activities.Assessment{RecommendedMinor: 120000, Rationale: strings.Repeat("long ", 100)},
				Tools:      []ToolAnswer{{Name: "lookup_policy", Source: SourceRecorded}}}},
	}
}

var reportAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func testReport() Report {
	rows := reportRows()
	s := Summary{ClaimIDs: []string{"c-error", "c-same", "c-usd", "c-human", "c-changed", "c-danger", "c-later"},
		Candidate:  Candidate{Model: "cand-model", PromptVersion: "p2"},
		NotStarted: []string{"c-later"},
		Progress: Progress{Total: 7, Started: 6, Evaluated: 5, Changed: 4, Dangerous: 1, NotEvaluated: 1,
			SpentMicros: 25000, StoppedBySpend: true}}
	return NewReport("wi-1", s, rows, reportAt)
}

func TestReportOrdersRows(t *testing.T) {
	r := testReport()
	var ids []string
	for _, row := range r.Rows {
		ids = append(ids, row.ClaimID)
	}
	assert.Equal(t, []string{"c-danger", "c-changed", "c-human", "c-usd", "c-same", "c-error"}, ids)
	assert.Equal(t, []string{"c-danger"}, r.SkipsIntervention)
	assert.Equal(t, []string{"c-danger"}, r.SkipsHuman)
	assert.Equal(t, []string{"c-later"}, r.NotStarted)
}

func TestReportMatrix(t *testing.T) {
	assert.Equal(t, []MatrixCell{
		{Then: workflows.RouteAutoApprove, Now: workflows.RouteAutoApprove, Count: 2},
		{Then: workflows.RouteAutoApprove, Now: workflows.RouteHuman, Count: 1},
		{Then: workflows.RouteAutoApprove, Now: workflows.RouteReject, Count: 1},
		{Then: workflows.RouteHuman, Now: workflows.RouteAutoApprove, Count: 1},
	}, testReport().Matrix)
}

func TestReportPayoutDeltas(t *testing.T) {
	assert.Equal(t, []PayoutDelta{
		{Currency: "eur", Evaluated: 4, PaidThenMinor: 180000, Decided: 3, DecidedDeltaMinor: 40000 - 5000,
			ProposedToHumans: 1, ProposedToHumansMinor: 30000},
		{Currency: "usd", Evaluated: 1, PaidThenMinor: 10000, Decided: 1, DecidedDeltaMinor: -10000},
	}, testReport().Payouts)
}

func TestReportUsageAndTools(t *testing.T) {
	r := testReport()
	then := r.Usage.Then
	assert.Equal(t, []string{"recorded-model (prompt v1)"}, then.Models)
	assert.Equal(t, 4, then.Claims)
	assert.Equal(t, 1, then.NoModelCalls) // c-usd
	assert.Equal(t, int64(10000), then.CostMicros)
	assert.InDelta(t, 2500, then.MeanCostMicros, 1e-9)
	assert.Equal(t, int64(2000), then.P50CostMicros)
	assert.Equal(t, int64(4000), then.P95CostMicros)
	assert.Equal(t, 3, then.LatencyKnown)
	assert.Equal(t, 1, then.LatencyUnknown) // c-changed
	assert.Equal(t, 2*time.Second, then.MeanLatency)
	assert.Equal(t, 2*time.Second, then.P50Latency)
	assert.Equal(t, 3*time.Second, then.P95Latency)

	now := r.Usage.Now
	assert.Equal(t, 5, now.Claims)
	assert.Equal(t, int64(25000), now.CostMicros)
	assert.Equal(t, 0, now.LatencyUnknown)
	assert.Equal(t, time.Second, now.P95Latency)
	assert.InDelta(t, 240, now.MeanTokens, 1e-9)

	assert.Equal(t, ToolSources{Recorded: 1, Live: 1, Simulated: 1}, r.ToolSources)
}

func TestReportMarkdown(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, testReport().Markdown(&buf))
	md := buf.String()

	assert.True(t, strings.HasPrefix(md, "# What-if wi-1: cand-model, prompt p2, policy as recorded\n"), md)
	skip := strings.Index(md, "## Would now skip a human who intervened")
	danger := strings.Index(md, "c-danger")
	changed := strings.Index(md, "## Changed claims")
	require.True(t, skip >= 0 && changed >= 0, md)
	assert.Less(t, skip, danger, "the dangerous claim is listed in the first section")
	assert.Less(t, danger, changed, "before the per-claim table")
	assert.Less(t, skip, strings.Index(md, "## Routes, then × now"), "the first section comes first")

	for _, want := range []string{
		"7 claims: 5 evaluated, 4 changed, 1 dangerous",
		"1 not evaluated, 1 not started",
		"**The spend cap stopped the what-if**",
		"approver lowered to 800.00 EUR (proposed 1,200.00 EUR)",
		"| auto-approve | 2 | 1 | 1 | 0 |",
		"| human | 1 | 0 | 0 | 0 |",
		"| EUR | 4 | 1,800.00 EUR | 3 | +350.00 EUR | 1 | 300.00 EUR |",
		"| USD | 1 | 100.00 USD | 1 | -100.00 USD | 0 | 0.00 USD |",
		"proposed 300.00 EUR",
		"| **c-danger** (dangerous) | approver lowered to 800.00 EUR (proposed 1,200.00 EUR) | human → auto-approve | 800.00 EUR → 1,200.00 EUR |",
		`receipts \| invoice match the claim`,
		"| c-error | not evaluated: no claim file |",
		"| tool answers | as recorded | 1 recorded, 1 live, 1 simulated |",
		"## What this cannot tell you",
		"Tool answers marked live",
	} {
		assert.Contains(t, md, want)
	}
	assert.NotContains(t, md, "c-same", "unchanged claims are counted, not listed")
	assert.Contains(t, md, "Unchanged: 1 claim, counted here, not listed")
	assert.Contains(t, md, "## Would now skip a human\n\nA human was asked about these claims; the candidate would decide them without one (approve, reject or cap). "+
		"In all 1 claim would now skip a human; those listed above are not repeated.\n\nNone.\n")
	assert.NotContains(t, md, strings.Repeat("long ", 50), "rationales are cut")
	assert.Contains(t, md, "long…")
}

func TestReportMarkdownNoneSkipped(t *testing.T) {
	rows := reportRows()[1:2] // c-same only
	var buf bytes.Buffer
	require.NoError(t, NewReport("wi-2", Summary{}, rows, reportAt).Markdown(&buf))
	md := buf.String()
	assert.Contains(t, md, "## Would now skip a human who intervened\n\nA human lowered, rejected or handed on these claims; the candidate would pay them without one.\n\nNone.")
	assert.Contains(t, md, "1 claims: 1 evaluated, 0 changed")
}

func TestReportOutcomeThen(t *testing.T) {
	for name, c := range map[string]struct {
		row  Row
		want string
	}{
		"paid":     {Row{Outcome: "paid", Currency: "eur", PaidThenMinor: 120000}, "paid 1,200.00 EUR"},
		"rejected": {Row{Outcome: "rejected", Human: &Human{Verdict: approvals.Reject, RejectedReason: "staged"}}, "rejected by approver (staged)"},
		"expired":  {Row{Outcome: "expired", Human: &Human{Expired: true}}, "sent to a human, expired"},
		"handed on, approved": {Row{Outcome: "paid", Currency: "jpy", PaidThenMinor: 1500000, Human: &Human{HandedOn: true, Verdict: approvals.Approve}},
			"handed on between approvers, approved by approver, paid 1,500,000 JPY"},
		"dead-lettered": {Row{Outcome: "dead-lettered"}, "dead-lettered"},
	} {
		assert.Equal(t, c.want, outcomeThen(c.row), name)
	}
}

func TestReportJSONRoundTrips(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	require.NoError(t, r.JSON(&buf))
	assert.Contains(t, buf.String(), "\n  \"whatif_id\": \"wi-1\"")
	assert.Contains(t, buf.String(), `"decided_delta_minor": 35000`)
	var got Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	assert.Equal(t, r, got)
}

func TestReportPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "whatif.svg")
	require.NoError(t, testReport().Plot(path))
	svg := readSVG(t, path)
	assert.Contains(t, svg, "cand-model, prompt p2, policy as recorded")
	assert.Contains(t, svg, "EUR only: 3 of 4 changed claims")
	assert.Contains(t, svg, "c-danger")
}

func TestReportPlotNoChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "whatif.svg")
	r := NewReport("wi-3", Summary{Candidate: Candidate{Model: "cand-model", PromptVersion: "p2"}}, reportRows()[:2], reportAt)
	require.NoError(t, r.Plot(path))
	assert.Contains(t, readSVG(t, path), "No changed claims")
}

// readSVG reads an SVG file and checks it is one: it starts as one and
// parses as XML.
func readSVG(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	require.True(t, strings.HasPrefix(s, "<?xml") || strings.HasPrefix(s, "<svg"), s[:min(len(s), 80)])
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	return s
}
