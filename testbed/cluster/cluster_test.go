package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/workflows"
)

const (
	taskQueue = "cluster-test"
	signalGo  = "go"
)

var claimStatus = temporal.NewSearchAttributeKeyKeyword("ClaimStatus")

// Greet is the tiny workflow: it marks itself with ClaimStatus=status,
// waits for a name on the "go" signal, greets it through an activity and
// marks itself "done".
func Greet(ctx workflow.Context, status string) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, claimStatus.ValueSet(status)); err != nil {
		return "", err
	}
	var name string
	workflow.GetSignalChannel(ctx, signalGo).Receive(ctx, &name)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 50},
	})
	var greeting string
	if err := workflow.ExecuteActivity(ctx, Hello, name).Get(ctx, &greeting); err != nil {
		return "", err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, claimStatus.ValueSet("done")); err != nil {
		return "", err
	}
	return greeting, nil
}

func Hello(ctx context.Context, name string) (string, error) {
	activity.GetLogger(ctx).Debug("hello", "name", name)
	return "hello " + name, nil
}

func quiet() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// The attributes registered are the ones the workflows use.
func TestSearchAttributesMatchWorkflows(t *testing.T) {
	for _, k := range []temporal.SearchAttributeKey{workflows.ClaimStatusKey, workflows.ApprovalDeadlineKey} {
		typ, ok := cluster.SearchAttributes[k.GetName()]
		require.True(t, ok, "%s is not registered", k.GetName())
		require.Equal(t, k.GetValueType(), typ, k.GetName())
	}
	require.Len(t, cluster.SearchAttributes, 2)
}

// A real server on PostgreSQL runs a workflow, finds it through SQL
// visibility, and finishes a workflow started before PostgreSQL and then the
// server crashed and came back.
func TestClusterSurvivesRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	began := time.Now()
	// Archive closed runs within a second, not the server's jittered 5 minutes.
	c, err := cluster.Start(ctx, t.TempDir(), cluster.Options{DynamicConfig: map[string]any{"history.archivalProcessorArchiveDelay": "1s"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	t.Logf("cluster started in %v: frontend %s, PostgreSQL on %d, log %s",
		time.Since(began).Round(time.Millisecond), c.Address(), c.Postgres().Port, c.LogPath())
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(c.LogPath())
			t.Logf("the end of the server's log:\n%s", b[max(0, len(b)-8000):])
		}
	}()

	// The worker takes the tasks; the admin starts, signals and reads
	// (testbed/cluster/authz_test.go has who may do what).
	wc, err := client.Dial(c.ClientOptions(temporalauth.RoleWorker))
	require.NoError(t, err)
	defer wc.Close()
	cl, err := client.Dial(c.ClientOptions(temporalauth.RoleAdmin))
	require.NoError(t, err)
	defer cl.Close()

	// No anonymous frontend: without a token, or with a forged one,
	// nothing is read or started; a reader reads and starts nothing.
	forged, err := c.Token(temporalauth.RoleWorker)
	require.NoError(t, err)
	forged = forged[:len(forged)-8] + "AAAAAAAA"
	for name, creds := range map[string]client.Credentials{"anonymous": nil, "forged token": client.NewAPIKeyStaticCredentials(forged)} {
		o := client.Options{HostPort: c.Address(), Namespace: cluster.Namespace, Logger: quiet(), Credentials: creds,
			ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}}
		anon, err := client.NewLazyClient(o)
		require.NoError(t, err)
		_, err = anon.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet-anonymous", TaskQueue: taskQueue}, Greet, "x")
		var denied *serviceerror.PermissionDenied
		assert.ErrorAs(t, err, &denied, "%s: a start", name)
		_, err = anon.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: cluster.Namespace})
		assert.ErrorAs(t, err, &denied, "%s: a read", name)
		anon.Close()
	}
	reader, err := client.NewLazyClient(c.ClientOptions(temporalauth.RoleReader))
	require.NoError(t, err)
	_, err = reader.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: cluster.Namespace})
	require.NoError(t, err, "a reader reads")
	_, err = reader.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet-reader", TaskQueue: taskQueue}, Greet, "x")
	var denied *serviceerror.PermissionDenied
	assert.ErrorAs(t, err, &denied, "a reader starts nothing")
	reader.Close()
	w := worker.New(wc, taskQueue, worker.Options{})
	w.RegisterWorkflow(Greet)
	w.RegisterActivity(Hello)
	require.NoError(t, w.Start())
	defer w.Stop()

	start := func(id, status string) client.WorkflowRun {
		t.Helper()
		run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, Greet, status)
		require.NoError(t, err)
		return run
	}
	result := func(run client.WorkflowRun) string {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 45*time.Second)
		defer rcancel()
		var s string
		require.NoError(t, run.Get(rctx, &s))
		return s
	}
	// find waits until a visibility query returns exactly the workflow id.
	find := func(query, id string) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: cluster.Namespace, Query: query})
			if !assert.NoError(ct, err) {
				return
			}
			var ids []string
			for _, e := range resp.Executions {
				ids = append(ids, e.Execution.WorkflowId)
			}
			assert.Equal(ct, []string{id}, ids, query)
		}, 20*time.Second, 200*time.Millisecond)
	}

	// The server serves Go's profiles on loopback (the benchmark reads them).
	resp, err := http.Get(c.PprofURL() + "/debug/pprof/cmdline")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s/debug/pprof/cmdline", c.PprofURL())

	// A tiny workflow, end to end, and SQL visibility on a custom attribute.
	first := start("greet-first", "x")
	find(`ClaimStatus="x"`, "greet-first")
	require.NoError(t, cl.SignalWorkflow(ctx, "greet-first", "", signalGo, "first"))
	require.Equal(t, "hello first", result(first))
	find(`ClaimStatus="done" AND WorkflowId="greet-first"`, "greet-first")
	// Its history is archived when it closes: the claim file's second copy.
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(c.ArchivePath(), "*.history"))
		return len(files) > 0
	}, 30*time.Second, 200*time.Millisecond, "no history archived under %s", c.ArchivePath())

	// A workflow blocked on a signal across both crashes.
	second := start("greet-second", "waiting")
	find(`ClaimStatus="waiting"`, "greet-second")

	began = time.Now()
	require.NoError(t, c.Postgres().Kill(ctx))
	require.NoError(t, c.Postgres().Restart(ctx))
	t.Logf("PostgreSQL killed and restarted in %v", time.Since(began).Round(time.Millisecond))

	// The server outlives a PostgreSQL crash: its pools drop the dead
	// connections and it serves again without a restart of its own.
	began = time.Now()
	afterPG := start("greet-after-postgres", "after-postgres")
	require.NoError(t, cl.SignalWorkflow(ctx, "greet-after-postgres", "", signalGo, "postgres"))
	require.Equal(t, "hello postgres", result(afterPG))
	t.Logf("a new workflow ran %v after PostgreSQL came back", time.Since(began).Round(time.Millisecond))

	began = time.Now()
	require.NoError(t, c.Kill())
	require.NoError(t, c.Restart(ctx))
	t.Logf("Temporal server killed and restarted (serving again) in %v", time.Since(began).Round(time.Millisecond))

	began = time.Now()
	require.NoError(t, cl.SignalWorkflow(ctx, "greet-second", "", signalGo, "second"))
	require.Equal(t, "hello second", result(second))
	t.Logf("the blocked workflow finished %v after the restart", time.Since(began).Round(time.Millisecond))
	find(`ClaimStatus="done" AND WorkflowId="greet-second"`, "greet-second")

	// A clean restart (SIGTERM) too.
	began = time.Now()
	require.NoError(t, c.Restart(ctx))
	t.Logf("Temporal server restarted cleanly in %v", time.Since(began).Round(time.Millisecond))
	third := start("greet-third", "after-restart")
	require.NoError(t, cl.SignalWorkflow(ctx, "greet-third", "", signalGo, "third"))
	require.Equal(t, "hello third", result(third))
}
