package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
)

// The soak's workers encrypt every payload, local-activity markers too: the
// verifier reads a marker through the workers' keys, and nothing without
// them (it once read every marker as nothing, and so never saw triage
// recorded).
func TestAnEncryptedMarkerReadsThroughTheWorkersKeys(t *testing.T) {
	kr, err := codec.CreateFile(filepath.Join(t.TempDir(), "keys.json"), "soak")
	require.NoError(t, err)
	dc, _ := config.ConvertersFor(kr)
	data, err := dc.ToPayloads(struct {
		ActivityType string
		Attempt      int32
	}{activityAssess, 2})
	require.NoError(t, err)
	ev := &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
		MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity",
			Details: map[string]*commonpb.Payloads{"data": data}}}}

	typ, attempt := localActivity(dc, ev)
	assert.Equal(t, activityAssess, typ)
	assert.EqualValues(t, 2, attempt)
	typ, attempt = localActivity(converter.GetDefaultDataConverter(), ev)
	assert.Empty(t, typ, "without the keys the marker reads as nothing")
	assert.Zero(t, attempt)
}

// A local model step asked n times is explained only by as many lost task
// attempts and local retries as history shows before its marker: one of
// each explains three asks, not four.
func TestALocalStepsRepeatsAreCountedFromItsSpan(t *testing.T) {
	v := &verifier{chaos: &chaos{}, workerOf: func(int) string { return "" }}
	var s localSpan
	s.lostTask(1, nil)
	s.marked(nil, 2)
	s.lostTask(5, nil) // after the last marker: not this step's
	assert.Equal(t, 1, s.lost)
	assert.Equal(t, 1, s.retries)

	// A paid model's turns come in several tasks (turn 1 local, turn 2
	// regular, turn 3 local again): a task lost before turn 3's marker may
	// have asked turn 3.
	later := s
	later.marked(nil, 1)
	assert.Equal(t, 6, later.lost)

	cause, _ := v.explainLocal(s, 2)
	assert.Equal(t, causeRetry, cause)
	_, why := v.explainLocal(s, 4)
	assert.Contains(t, why, "only 1 workflow task attempt(s) were lost and 1 local attempt(s) retried")
	cause, why = v.explainLocal(s, 3)
	assert.Empty(t, cause, "no kill, restart or fault in this chaos")
	assert.Contains(t, why, "with no worker killed")
}
