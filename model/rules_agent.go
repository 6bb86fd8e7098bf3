package model

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// TriageTurn plays the triage agent loop with rules, so the loop runs
// offline exactly as it does against a real model: the first turn asks for
// the policy, the claimant's prior claims and the first document; the next
// classifies from the claim and what the tools said, first flagging strong
// fraud signals for investigators (one more turn) when there are any. The
// answer is a function of the conversation, so asking again gives the same.
func (m RulesModel) TriageTurn(ctx context.Context, req TurnRequest) (Reply[Turn], error) {
	r, err := m.triageTurn(req)
	finish := "stop"
	if len(r.Output.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	traceRules(ctx, r.Usage, finish, err)
	return r, err
}

func (RulesModel) triageTurn(req TurnRequest) (Reply[Turn], error) {
	c := req.Claim
	results := map[string]string{}
	asked := map[string]bool{}
	size := len(c.Description)
	for _, m := range req.Messages {
		size += len(m.Content)
		switch m.Role {
		case "tool":
			results[m.Name] = m.Content
		case "assistant":
			for _, tc := range m.ToolCalls {
				asked[tc.Name] = true
			}
		}
	}
	usage := rulesUsage(size)
	call := func(calls ...ToolCall) (Reply[Turn], error) {
		for i := range calls {
			calls[i].ID = fmt.Sprintf("call_%d_%d", req.Turn, i+1)
		}
		return Reply[Turn]{Output: Turn{Messages: []Message{{Role: "assistant", ToolCalls: calls}}, ToolCalls: calls}, Usage: usage}, nil
	}

	if len(asked) == 0 && !req.Final {
		calls := []ToolCall{
			{Name: ToolLookupPolicy, Arguments: jsonArgs(map[string]string{"policy_id": c.PolicyID})},
			{Name: ToolPriorClaims, Arguments: "{}"},
		}
		if len(c.Documents) > 0 {
			calls = append(calls, ToolCall{Name: ToolGetDocumentText, Arguments: jsonArgs(map[string]string{"name": c.Documents[0].Name})})
		}
		return call(calls...)
	}

	var doc struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(results[ToolGetDocumentText]), &doc)
	t := rulesTriage(c, doc.Text)
	var prior struct {
		Total *int `json:"total"`
		More  bool `json:"more_than_total"`
	}
	if json.Unmarshal([]byte(results[ToolPriorClaims]), &prior) == nil && prior.Total != nil {
		more := ""
		if prior.More {
			more = "+"
		}
		t.Summary += fmt.Sprintf("; %d%s prior claim(s)", *prior.Total, more)
	}
	var policy struct {
		Found *bool `json:"found"`
	}
	if json.Unmarshal([]byte(results[ToolLookupPolicy]), &policy) == nil && policy.Found != nil && !*policy.Found {
		t.Summary += "; policy not found"
	}
	if t.FraudScore >= 50 {
		if !asked[ToolFlagFraudSignal] && !req.Final {
			return call(ToolCall{Name: ToolFlagFraudSignal, Arguments: jsonArgs(map[string]string{
				"signal": strings.Join(t.FraudSignals, ","), "note": t.Summary})})
		}
		if strings.Contains(results[ToolFlagFraudSignal], `"flagged":true`) {
			t.Summary += "; flagged for investigation"
		}
	}
	answer, err := json.Marshal(t)
	if err != nil {
		return Reply[Turn]{}, err
	}
	return Reply[Turn]{Output: Turn{Messages: []Message{{Role: "assistant", Content: string(answer)}}, Triage: &t}, Usage: usage}, nil
}

func jsonArgs(v map[string]string) string {
	b, _ := json.Marshal(v)
	return string(b)
}
