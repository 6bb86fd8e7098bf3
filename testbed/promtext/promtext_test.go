package promtext

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGetReadsTheNamedSamplesWithTheirLabels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`# HELP temporal_worker_task_slots_used slots
temporal_worker_task_slots_used{namespace="default",worker_type="ActivityWorker"} 3
temporal_worker_task_slots_used{namespace="default",worker_type="WorkflowWorker"} 1
temporal_worker_task_slots_available{worker_type="ActivityWorker"} 997
temporal_sticky_cache_size{namespace="default"} 12
temporal_sticky_cache_size_other 5
`))
	}))
	defer srv.Close()
	got, err := Get(context.Background(), srv.URL, "temporal_worker_task_slots_used", "temporal_sticky_cache_size")
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, "ActivityWorker", got[0].Label("worker_type"))
	assert.Equal(t, 3.0, got[0].Value)
	assert.Equal(t, "WorkflowWorker", got[1].Label("worker_type"))
	assert.Equal(t, "temporal_sticky_cache_size", got[2].Name)
	assert.Equal(t, 12.0, got[2].Value)
	assert.Equal(t, "", got[2].Label("worker_type"))
}
