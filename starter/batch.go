package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durableclaims/durableclaims/internal/store"
)

// progressFrom is the smallest batch that reports progress and a summary.
const progressFrom = 20

// outcome is what became of one claim of a batch.
type outcome int

const (
	started outcome = iota
	existed
	registered
	failed
	conflict // the claim's ID is registered with other contents
	outcomes
)

var outcomeNames = [outcomes]string{"started", "already started", "registered", "failed", "refused (registered otherwise)"}

func outcomeOf(err error) outcome {
	if errors.Is(err, store.ErrConflict) {
		return conflict
	}
	return failed
}

// batch starts claims a bounded number at a time and counts what became of
// them.
type batch struct {
	out   io.Writer
	total int
	hint  bool // print the decision command after each claim (a batch of one)
	begin time.Time
	n     [outcomes]atomic.Int64
}

// run calls one for every claim index, concurrency at a time, until all
// are done or stop ends (those under way finish); every interval it writes
// a progress line to progress, if not nil.
func (b *batch) run(stop context.Context, concurrency int, one func(int) outcome, progress io.Writer, interval time.Duration) {
	b.begin = time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, b.total) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b.n[one(i)].Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	var reporter sync.WaitGroup
	if progress != nil {
		reporter.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-finished:
					return
				case <-t.C:
					fmt.Fprintln(progress, "starter: "+b.progress())
				}
			}
		})
	}
feed:
	for i := range b.total {
		if stop.Err() != nil {
			break // a select with both cases ready picks either
		}
		select {
		case next <- i:
		case <-stop.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(finished)
	reporter.Wait() // no progress line after the summary
}

func (b *batch) count(o outcome) int { return int(b.n[o].Load()) }

func (b *batch) done() int {
	n := 0
	for o := range outcomes {
		n += b.count(o)
	}
	return n
}

func (b *batch) elapsed() time.Duration { return time.Since(b.begin) }

// summary counts the outcomes that happened: "1200 started, 3 failed".
func (b *batch) summary() string {
	var parts []string
	for o := range outcomes {
		if n := b.count(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, outcomeNames[o]))
		}
	}
	if len(parts) == 0 {
		return "none done"
	}
	return strings.Join(parts, ", ")
}

// progress is one line: done of total, the outcomes, the pace and what is
// left at that pace.
func (b *batch) progress() string {
	done, el := b.done(), b.elapsed()
	line := fmt.Sprintf("%d/%d claims (%s)", done, b.total, b.summary())
	if done > 0 && el > 0 {
		perMin := float64(done) / el.Minutes()
		left := time.Duration(float64(b.total-done) / float64(done) * float64(el))
		line += fmt.Sprintf(", %.0f a minute, about %s left", perMin, left.Round(time.Second))
	}
	return line
}

// lockedWriter keeps the lines of claims started at once whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// claimFiles expands the arguments: a directory stands for the *.json
// files directly in it, in name order.
func claimFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			out = append(out, a) // read (and any error reported) with the others
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: a directory with no claim files (*.json) in it", a)
		}
		slices.Sort(m)
		out = append(out, m...)
	}
	return out, nil
}
