package killpoint

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func killer(t *testing.T, state string, batch string, kills *int, mu *sync.Mutex) *Killer {
	t.Helper()
	t.Setenv("PEER_CRASH", "after-pay")
	t.Setenv("PEER_CRASH_STATE", state)
	t.Setenv("PEER_CRASH_BATCH", batch)
	t.Setenv("PEER_CRASH_WAIT", "50ms")
	k, err := FromEnv(slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	k.kill = func() { mu.Lock(); *kills++; mu.Unlock() }
	return k
}

func TestABatchIsOneKill(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	var mu sync.Mutex
	kills := 0
	count := func() int { mu.Lock(); defer mu.Unlock(); return kills }
	k := killer(t, state, "3", &kills, &mu)
	k.At("in-notify", "c1") // another point: passes
	var wg sync.WaitGroup
	for _, c := range []string{"c1", "c2", "c3"} {
		wg.Go(func() { k.At("after-pay", c) })
	}
	wg.Wait()
	if count() != 1 {
		t.Fatalf("three claims at the point: %d kills, want 1", count())
	}
	b, _ := os.ReadFile(state)
	if got := strings.Fields(string(b)); len(got) != 3 || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("state %q: want the three claims on one line", b)
	}
	// Restarted: the three pass, a fourth alone is killed after the wait.
	k = killer(t, state, "3", &kills, &mu)
	for _, c := range []string{"c1", "c2", "c3"} {
		k.At("after-pay", c)
	}
	start := time.Now()
	k.At("after-pay", "c4")
	if count() != 2 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("a lone claim: %d kills after %v, want 2 after the wait", count(), time.Since(start))
	}
}

func TestEnv(t *testing.T) {
	for _, env := range [][2]string{{"PEER_CRASH", "during-pay"}, {"PEER_CRASH_BATCH", "0"}, {"PEER_CRASH_WAIT", "soon"}} {
		t.Setenv("PEER_CRASH", "after-pay")
		t.Setenv("PEER_CRASH_STATE", "x")
		t.Setenv("PEER_CRASH_BATCH", "")
		t.Setenv("PEER_CRASH_WAIT", "")
		t.Setenv(env[0], env[1])
		if _, err := FromEnv(slog.Default()); err == nil {
			t.Errorf("%s=%s accepted", env[0], env[1])
		}
	}
	var k *Killer
	k.At("after-pay", "c1") // nil never kills
}
