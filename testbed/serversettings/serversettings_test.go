package serversettings

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo's dev server is started by shell, not Go: it must be given
// every flag the Go-started servers get.
func TestDemoDevServerGetsEverySetting(t *testing.T) {
	script, err := os.ReadFile("../../scripts/lib.sh")
	require.NoError(t, err)
	args := DevServerArgs()
	require.NotEmpty(t, args)
	for i := 0; i < len(args); i += 2 {
		flag := args[i] + " " + args[i+1]
		assert.True(t, strings.Contains(string(script), flag), "scripts/lib.sh starts the dev server without %q", flag)
	}
}

func TestDevServerArgsAreFlagValuePairs(t *testing.T) {
	args := DevServerArgs()
	require.Equal(t, 0, len(args)%2)
	assert.Contains(t, args, "matching.useNewMatcher=true")
	assert.Contains(t, args, "system.enableActivityEagerExecution=true")
	assert.Contains(t, args, "history.transferProcessorMaxPollRPS=1000")
	assert.Contains(t, args, "ClaimStatus=Keyword")
}
