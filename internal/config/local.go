package config

import (
	"os"
	"path/filepath"

	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// The local stack: where every program keeps and finds its files on one
// machine when no variable names them, all under LocalDir, relative to the
// directory it runs in. make demo builds its stack here, so every program
// run afterwards from the repository finds the claims, keys and records
// the demo made (scripts/lib.sh). The blob store's default is LocalDir's
// blobs/ too (blobs.DefaultURL) and stripesim's its stripesim.db.
const LocalDir = "var"

// Local is name in the local stack.
func Local(name string) string { return filepath.Join(LocalDir, name) }

// Files of the local stack.
const (
	// DefaultKeysFile holds the payload keys when neither CODEC_KEYS_FILE
	// nor CODEC_KEYS is set.
	DefaultKeysFile = LocalDir + "/codec-keys.json"
	// LocalApprovers is the approver directory `claimsctl keygen
	// --directory` writes for this machine.
	LocalApprovers = LocalDir + "/approvers.json"
	// LocalLedgerKey is the ledger key (`claimsctl keygen --ledger`), its
	// public half beside it with .pub.
	LocalLedgerKey = LocalDir + "/ledger.key"
	// LocalInboxKey is the inbox's service key (`claimsctl keygen
	// --service inbox`).
	LocalInboxKey = LocalDir + "/keys/inbox.key"
)

// ClaimsDB is the system of record: CLAIMS_DB, else the local stack's
// SQLite file.
func ClaimsDB() string { return Get("CLAIMS_DB", Local("claims.db")) }

// MailSpool is where claimant e-mails are written without SMTP: MAIL_SPOOL,
// else the local stack's mail/.
func MailSpool() string { return Get("MAIL_SPOOL", Local("mail")) }

// ApproversFile is the approver directory: APPROVERS_FILE, else
// LocalApprovers when it exists, else "" (authority's sample, which holds
// no keys).
func ApproversFile() string { return Get("APPROVERS_FILE", IfExists(LocalApprovers)) }

// LedgerKey is the ledger key that signs the claim-file log's checkpoints:
// LEDGER_KEY, else LocalLedgerKey when it exists, else "" (none).
func LedgerKey() string { return Get("LEDGER_KEY", IfExists(LocalLedgerKey)) }

// LedgerPublicKey is the ledger's public key, for verifying: LEDGER_PUBLIC_KEY,
// else the .pub beside LedgerKey, else LocalLedgerKey's .pub when it exists
// (a machine that verifies but does not sign), else "".
func LedgerPublicKey() string {
	if v := Get("LEDGER_PUBLIC_KEY", ""); v != "" {
		return v
	}
	if k := LedgerKey(); k != "" {
		return k + ".pub"
	}
	return IfExists(LocalLedgerKey + ".pub")
}

// IfExists is path when a file is there, else "": the local stack's
// optional files are defaults only once someone has made them.
func IfExists(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// DefaultInboxAddr is where the inbox listens unless INBOX_ADDR says.
const DefaultInboxAddr = "localhost:8088"

// DefaultTraceURLTemplate links a trace on the local stack's inbox, which
// draws it from Jaeger all-in-one's query service (JAEGER_QUERY_URL; the
// Jaeger built here has no UI of its own).
const DefaultTraceURLTemplate = "http://" + DefaultInboxAddr + "/traces/{trace_id}"

// TraceURL is the link to a claim's trace: TRACE_URL_TEMPLATE ("{trace_id}"
// replaced; "none" for no link), else DefaultTraceURLTemplate; "" when the
// claim has no trace.
func TraceURL(traceID string) string {
	t := Get("TRACE_URL_TEMPLATE", DefaultTraceURLTemplate)
	if t == "none" {
		return ""
	}
	return telemetry.TraceURL(t, traceID)
}
