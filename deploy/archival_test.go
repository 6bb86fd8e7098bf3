//go:build !unit

// This test starts a Temporal server on PostgreSQL: make test runs it,
// make unit (built with the unit tag) leaves it out.

package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// The compose file's second copy of every claim is the server's own history
// archival: temporal-admin-tools turns it on for the namespace. Its script
// runs here, with the real CLI, against a real server (PostgreSQL, JWT
// authorization, the filestore archiver on, as in the auto-setup image),
// and a run that closes in the namespace it made is archived where the
// compose file says.
func TestAdminToolsTurnsOnHistoryArchivalOnARealServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, t.TempDir(), cluster.Options{DynamicConfig: map[string]any{"history.archivalProcessorArchiveDelay": "1s"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })

	job := service(t, loadRepo(t), "temporal-admin-tools")
	cli := testenv.TemporalCLI(t)
	admin, err := c.Token(temporalauth.RoleAdmin)
	require.NoError(t, err)
	run := func(namespace, uri string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", job.Command[0])
		cmd.Env = []string{"PATH=" + filepath.Dir(cli) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for k, v := range job.Environment {
			if v != nil {
				cmd.Env = append(cmd.Env, k+"="+*v)
			}
		}
		// After the job's own: where the server really is.
		cmd.Env = append(cmd.Env, "TEMPORAL_ADDRESS="+c.Address(), "TEMPORAL_NAMESPACE="+namespace,
			"TEMPORAL_API_KEY="+admin, "TEMPORAL_HISTORY_ARCHIVAL_URI="+uri)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the admin-tools job against %s:\n%s", c.Address(), out)
		return string(out)
	}
	describe := func(namespace string) (state, uri string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, cli, "operator", "namespace", "describe", "--address", c.Address(),
			"--namespace", namespace, "--api-key", admin, "--tls=false", "-o", "json").CombinedOutput()
		require.NoError(t, err, "%s", out)
		var d struct {
			Config struct{ HistoryArchivalState, HistoryArchivalUri string }
		}
		require.NoError(t, json.Unmarshal(out, &d), "%s", out)
		return d.Config.HistoryArchivalState, d.Config.HistoryArchivalUri
	}

	// A new namespace: made with archival on, and the job can run again.
	archive := filepath.Join(t.TempDir(), "history")
	run("claims-compose", "file://"+archive)
	run("claims-compose", "file://"+archive)
	state, uri := describe("claims-compose")
	assert.Equal(t, "ARCHIVAL_STATE_ENABLED", state)
	assert.Equal(t, "file://"+archive, uri)

	// A namespace that archives elsewhere already keeps its URI, and the
	// job says so instead of failing the stack's start.
	out := run(cluster.Namespace, "file://"+archive)
	assert.Contains(t, out, "keeps its own history archival URI")
	_, uri = describe(cluster.Namespace)
	assert.Equal(t, "file://"+c.ArchivePath(), uri)

	// A run that closes in the new namespace is archived under the URI.
	o := c.ClientOptions(temporalauth.RoleAdmin)
	o.Namespace = "claims-compose"
	cl, err := client.Dial(o)
	require.NoError(t, err)
	defer cl.Close()
	r, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "archived-run", TaskQueue: "nobody-polls"}, "Nothing")
	require.NoError(t, err)
	require.NoError(t, cl.TerminateWorkflow(ctx, r.GetID(), r.GetRunID(), "closed for the test"))
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(archive, "*.history"))
		return len(files) > 0
	}, time.Minute, 200*time.Millisecond, "no history archived under %s", archive)
	_, err = cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "claims-compose"})
	require.NoError(t, err)
}
