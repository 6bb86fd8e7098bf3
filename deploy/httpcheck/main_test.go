package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/_sim/health":
			_, _ = w.Write([]byte("ok"))
		case "/slow":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	cases := []struct {
		name string
		args []string
		want int
	}{
		{"healthy", []string{srv.URL + "/_sim/health"}, 0},
		{"non-2xx", []string{srv.URL + "/other"}, 1},
		{"timeout", []string{"-timeout", "100ms", srv.URL + "/slow"}, 1},
		{"connection refused", []string{closedURL + "/_sim/health"}, 1},
		{"no url", nil, 2},
		{"two urls", []string{srv.URL, srv.URL}, 2},
		{"bad url", []string{"http://[::1"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(tc.args, &stderr); got != tc.want {
				t.Fatalf("run(%q) = %d, want %d (stderr: %s)", tc.args, got, tc.want, stderr.String())
			}
		})
	}
}
