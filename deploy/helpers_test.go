package deploy

// Helpers shared by the checks of every file: the repository, its files,
// strict YAML, shell words.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// shellWords splits s like a POSIX shell would for simple commands
// (whitespace, single and double quotes, backslash escapes).
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(s):
			inWord = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func slicesContains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// decodeStrict decodes YAML the way Prometheus and Grafana read their files:
// an unknown (misspelt) key is an error, not silently ignored.
func decodeStrict(doc []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	require.NoError(t, err)
	return b
}

// runJobScript runs a compose one-shot job's script (its one command,
// under /bin/sh -c) as the job would, with a fake tool on PATH: fake is
// the tool's shell script, written as bin/name. A fake sleep beside it
// returns at once: the script's pauses between tries are not waited out.
// The job's environment comes after extra. It returns the combined output.
func runJobScript(t *testing.T, job types.ServiceConfig, name, fake string, extra ...string) ([]byte, error) {
	t.Helper()
	require.Equal(t, []string{"/bin/sh", "-c"}, []string(job.Entrypoint))
	require.Len(t, job.Command, 1)
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(fake), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "sleep"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, "-c", job.Command[0])
	cmd.Env = append([]string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, extra...)
	for k, v := range job.Environment {
		if v != nil {
			cmd.Env = append(cmd.Env, k+"="+*v)
		}
	}
	return cmd.CombinedOutput()
}
