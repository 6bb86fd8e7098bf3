// Package promtext reads what the rig needs from a program's Prometheus
// text endpoint: the samples of a few metrics, with their labels. The
// bench samples a worker's task slots with it, the fault soak what a worker
// holds when it is cut off.
package promtext

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one line of the exposition: a metric, its labels as written,
// and its value.
type Sample struct {
	Name   string
	Labels string // `worker_type="ActivityWorker",…`, without braces
	Value  float64
}

// Label is one label's value, or "".
func (s Sample) Label(name string) string {
	i := strings.Index(s.Labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := s.Labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// Get reads url (…/metrics) and returns the samples of the named metrics.
func Get(ctx context.Context, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, val, ok := cut(line)
		if !ok {
			continue
		}
		name, labels, _ := strings.Cut(series, "{")
		if !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		out = append(out, Sample{Name: name, Labels: strings.TrimSuffix(labels, "}"), Value: v})
	}
	return out, sc.Err()
}

// cut splits a line at its last space: the series, and the value.
func cut(line string) (string, string, bool) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", "", false
	}
	return line[:i], line[i+1:], true
}
