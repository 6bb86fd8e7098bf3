package approvals

import (
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// FuzzSignalPayload: any payload, in any encoding, is either a decision
// input or a refusal with a reason; none panics.
func FuzzSignalPayload(f *testing.F) {
	for _, s := range []string{`{"approver":"adjuster-17"}`, `"yes"`, `null`, `[]`, `{"approver":7}`, `{"aprover":"x"}`,
		`{"approver":"a","payload_sha256":"zz"}`, `{` + strings.Repeat(`"a":`, 1000), "\xff"} {
		f.Add([]byte(s), converter.MetadataEncodingJSON)
	}
	f.Add([]byte{1, 2, 3}, converter.MetadataEncodingBinary)
	f.Add([]byte(nil), "")
	f.Fuzz(func(t *testing.T, data []byte, encoding string) {
		p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding)}, Data: data}
		in, shown, err := parse(converter.NewRawValue(p))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a reason")
			}
			if len(shown) > 256 {
				t.Fatalf("recorded payload is %d bytes; the trail keeps at most 256", len(shown))
			}
			return
		}
		_ = in
	})
}
