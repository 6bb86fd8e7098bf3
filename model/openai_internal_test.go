package model

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetryAfterHeaders(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"Retry-After": "3"}, "3s"},
		{map[string]string{"retry-after-ms": "250", "Retry-After": "3"}, "250ms"},
		{map[string]string{"Retry-After": "100000"}, MaxRetryAfter.String()},
		{map[string]string{"Retry-After": "soon"}, "0s"},
		{nil, "0s"},
	} {
		resp := &http.Response{Header: http.Header{}}
		for k, v := range tc.headers {
			resp.Header.Set(k, v)
		}
		assert.Equal(t, tc.want, retryAfter(resp).String(), "%v", tc.headers)
	}
	assert.Zero(t, retryAfter(nil))
}

func TestParseModelAnswers(t *testing.T) {
	good := `{"category":"fire","severity":"high","fraud_signals":["x"],"fraud_score":30,"summary":"s"}`
	tr, err := parseTriage("```json\n" + good + "\n```")
	require.NoError(t, err, "a Markdown fence is tolerated")
	assert.Equal(t, "fire", tr.Category)
	for _, bad := range []string{
		"", "water damage", `{"category":"fire"}`, good + good,
		`{"category":"fire","severity":"high","fraud_signals":[],"fraud_score":101,"summary":"s"}`,
		`{"category":"fire","severity":"high","fraud_signals":[],"fraud_score":1,"summary":"s","extra":1}`,
	} {
		_, err := parseTriage(bad)
		assert.Error(t, err, bad)
	}
	as, err := parseAssessment(`{"recommended_minor":12345,"rationale":"r","needs_review":false}`)
	require.NoError(t, err)
	assert.Equal(t, int64(12345), as.RecommendedMinor)
	for _, bad := range []string{
		`{"recommended_minor":-1,"rationale":"r","needs_review":false}`,
		`{"recommended_minor":12.5,"rationale":"r","needs_review":false}`,
		`{"recommended_minor":99999999999999999999,"rationale":"r","needs_review":false}`,
		`{"recommended_minor":1,"rationale":"","needs_review":false}`,
		`{"recommended_minor":1,"rationale":"r"}`,
	} {
		_, err := parseAssessment(bad)
		assert.Error(t, err, bad)
	}
}
