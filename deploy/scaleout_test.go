package deploy

// The scale-out shape of docker-compose.yml: worker replicas that keep no
// state of their own. The claims store is PostgreSQL (CLAIMS_DB), documents
// are in an S3 bucket (BLOB_URL; MinIO stands in for S3), e-mail leaves
// through an SMTP relay (SMTP_ADDR; mailpit stands in for it), so no worker
// shares a volume with another container and any number of them can run.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/s3blob" // s3://, as the worker, starter and inbox register it
)

const (
	// claimsDBService is the PostgreSQL server of the claims system of
	// record: its own server, not Temporal's "postgresql" (deploy/README.md).
	claimsDBService = "claims-postgresql"
	// blobService is the S3-compatible store, and blobSetupJob the one-shot
	// job that creates the bucket and the workers' MinIO user in it.
	blobService  = "minio"
	blobSetupJob = "minio-setup"
	// mailService is the SMTP relay the workers send through.
	mailService = "mailpit"
)

// claimsServices open the claims store (CLAIMS_DB); blobServices open the
// document store (BLOB_URL).
var (
	claimsServices = []string{"worker", "starter", "claimsctl"}
	blobServices   = []string{"worker", "starter"}
)

// stateful reports the environment variables of s that name a place on its
// own file system where it keeps data.
func stateful(s types.ServiceConfig) map[string]string {
	paths := map[string]string{}
	for _, key := range []string{"CLAIMS_DB", "MAIL_SPOOL", "BLOB_URL", "STRIPESIM_DB"} {
		v, ok := s.Environment[key]
		if !ok || v == nil || *v == "" {
			continue
		}
		switch {
		case key == "BLOB_URL":
			if u, err := url.Parse(*v); err == nil && u.Scheme == "file" {
				paths[key] = u.Path
			}
		case key == "CLAIMS_DB" && isPostgresURL(*v):
		default:
			paths[key] = *v
		}
	}
	return paths
}

// isPostgresURL is the store's rule: postgres:// or postgresql:// selects
// PostgreSQL, anything else is a SQLite path.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// The workers are replicas with nothing on disk that matters: no named or
// anonymous volume, no writable bind mount, nothing in common with another
// container but the read-only insurer configuration that each host
// provides.
func TestWorkersShareNoVolume(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")

	assert.Greater(t, w.GetScale(), 1, "the workers must run as replicas (deploy.replicas or scale)")
	assert.Empty(t, w.ContainerName, "container_name prevents running replicas")
	assert.Empty(t, w.Ports, "fixed host ports would collide between replicas")

	for _, v := range w.Volumes {
		switch v.Type {
		case types.VolumeTypeTmpfs:
		case types.VolumeTypeBind:
			assert.True(t, v.ReadOnly, "worker: bind mount %s:%s is writable: replicas on one host would share it, and a replica on another host would not see it", v.Source, v.Target)
		default:
			assert.Fail(t, "worker mounts a volume", "%s %q at %s: a worker keeps no state of its own (claims in PostgreSQL, documents in S3, mail through SMTP)", v.Type, v.Source, v.Target)
		}
	}
	for key, path := range stateful(w) {
		assert.Fail(t, "worker keeps data on its own file system", "%s=%s", key, path)
	}

	// Nothing writable in common with any other container.
	for _, s := range p.AllServices() {
		if s.Name == w.Name {
			continue
		}
		for _, a := range w.Volumes {
			for _, b := range s.Volumes {
				if a.Type != b.Type || a.Source == "" || a.Source != b.Source {
					continue
				}
				shared := a.Type == types.VolumeTypeVolume || !a.ReadOnly || !b.ReadOnly
				assert.False(t, shared, "worker and %s share %s %q", s.Name, a.Type, a.Source)
			}
		}
	}

	// The tools too: the claims store and the documents are on no volume.
	for _, name := range append(append([]string{}, claimsServices...), blobServices...) {
		s := service(t, p, name)
		for _, v := range s.Volumes {
			assert.NotEqual(t, types.VolumeTypeVolume, v.Type, "%s mounts volume %q at %s", name, v.Source, v.Target)
		}
		for key, path := range stateful(s) {
			assert.Fail(t, "keeps data on its own file system", "%s: %s=%s", name, key, path)
		}
	}
	assert.NotContains(t, p.VolumeNames(), "claims-data", "the claims store and documents are on no volume")

	// E-mail leaves through an SMTP relay on the compose network, not into a
	// spool on one replica's disk.
	_, spool := w.Environment["MAIL_SPOOL"]
	assert.False(t, spool, "worker: MAIL_SPOOL is a directory on one replica; send through SMTP_ADDR")
	host, port := hostPort(t, "SMTP_ADDR", env(t, w, "SMTP_ADDR"))
	assert.Equal(t, mailService, host, "SMTP_ADDR must name the mail relay service by default")
	assert.Equal(t, 1025, port)
	mail := service(t, p, mailService)
	assert.Empty(t, checkImageRef(mail.Image, false), "%s image %q", mailService, mail.Image)
	require.NotNil(t, mail.HealthCheck, "%s healthcheck", mailService)
	assert.Empty(t, mail.Ports, "%s: its UI and API have no authentication and show claimants' e-mail; not published", mailService)
}

// claimsDBPassword is the effective password of a PostgreSQL URL for a
// client with env: the URL's own, else PGPASSWORD (which pgx reads).
func claimsDBPassword(t *testing.T, s types.ServiceConfig, dsn *url.URL) string {
	t.Helper()
	if pw, ok := dsn.User.Password(); ok {
		return pw
	}
	if v, ok := s.Environment["PGPASSWORD"]; ok && v != nil {
		return *v
	}
	return ""
}

// The claims system of record is a PostgreSQL database every worker on
// every host shares; its password comes from CLAIMS_DB_PASSWORD, never from
// the file.
func TestClaimsDBIsPostgres(t *testing.T) {
	for _, password := range []string{requiredVars["CLAIMS_DB_PASSWORD"], "another-claims-db-password"} {
		e := repoEnv()
		e["CLAIMS_DB_PASSWORD"] = password
		p, err := loadRepoWith(t, e, "*")
		require.NoError(t, err)

		db := service(t, p, claimsDBService)
		assert.True(t, strings.HasPrefix(db.Image, "postgres:"), "%s image %q", claimsDBService, db.Image)
		require.NotNil(t, db.HealthCheck, "%s needs a healthcheck for the workers' depends_on", claimsDBService)
		assert.Contains(t, strings.Join(db.HealthCheck.Test, " "), "pg_isready")
		assert.Equal(t, password, env(t, db, "POSTGRES_PASSWORD"), "%s: POSTGRES_PASSWORD must be ${CLAIMS_DB_PASSWORD}", claimsDBService)
		dataVol := namedVolumeAt(db, "/var/lib/postgresql/data")
		assert.NotEmpty(t, dataVol, "the claims database must live on a named volume")
		assert.Empty(t, db.Ports, "the claims database is reached over the compose network only")

		var first string
		for _, name := range claimsServices {
			s := service(t, p, name)
			raw := env(t, s, "CLAIMS_DB")
			if first == "" {
				first = raw
			}
			assert.Equal(t, first, raw, "%s: every service must open the same claims store", name)
			assert.True(t, isPostgresURL(raw), "%s: CLAIMS_DB %q must be a postgres:// URL", name, raw)
			u, err := url.Parse(raw)
			require.NoError(t, err, "%s: CLAIMS_DB", name)
			assert.Equal(t, claimsDBService, u.Hostname(), "%s: CLAIMS_DB host", name)
			assert.Contains(t, []string{"", "5432"}, u.Port(), "%s: CLAIMS_DB port", name)
			assert.Equal(t, "/claims", u.Path, "%s: the database is claims", name)
			assert.Equal(t, strings.TrimPrefix(u.Path, "/"), env(t, db, "POSTGRES_DB"), "%s: the database %s creates", name, claimsDBService)
			assert.Equal(t, env(t, db, "POSTGRES_USER"), u.User.Username(), "%s: CLAIMS_DB user", name)
			assert.Equal(t, password, claimsDBPassword(t, s, u),
				"%s: the claims DB password must be ${CLAIMS_DB_PASSWORD} (in CLAIMS_DB or PGPASSWORD), never a literal", name)

			require.Contains(t, s.DependsOn, claimsDBService, "%s must wait for the claims database", name)
			assert.Equal(t, types.ServiceConditionHealthy, s.DependsOn[claimsDBService].Condition, name)
			assert.True(t, sharesNetwork(s, db), "%s and %s must share a network", name, claimsDBService)
			assert.Empty(t, namedVolumeAt(s, "/var/lib/postgresql/data"), name)
		}
		for _, s := range p.AllServices() {
			if s.Name != db.Name {
				for _, v := range s.Volumes {
					assert.False(t, v.Type == types.VolumeTypeVolume && v.Source == dataVol, "%s mounts the claims database's volume", s.Name)
				}
			}
		}

		// Temporal's database server is not the claims store's: separate
		// credentials, backups and restores (deploy/README.md).
		assert.NotEqual(t, env(t, service(t, p, "temporal"), "POSTGRES_SEEDS"), claimsDBService)
	}
	assertRequired(t, "CLAIMS_DB_PASSWORD")
}

// blobBucket returns the bucket the setup job creates and the S3 endpoint
// it creates it at.
func blobBucket(t *testing.T, p *types.Project) (bucket, endpoint string) {
	t.Helper()
	job := service(t, p, blobSetupJob)
	return env(t, job, "BLOB_BUCKET"), env(t, job, "MINIO_ENDPOINT")
}

// Documents are in one S3 bucket on MinIO, reached by the workers with a
// MinIO user of their own (not the root credentials), all from the
// environment.
func TestBlobStoreIsMinIO(t *testing.T) {
	p := loadRepo(t)
	bucket, endpoint := blobBucket(t, p)
	job := service(t, p, blobSetupJob)
	minio := service(t, p, blobService)

	ep, err := url.Parse(endpoint)
	require.NoError(t, err)
	assert.Equal(t, "http", ep.Scheme)
	assert.Equal(t, blobService, ep.Hostname(), "the endpoint must name the MinIO service")
	assert.Equal(t, "9000", ep.Port(), "MinIO's S3 API port")
	addr := flagValue(minio.Command, "address", ":9000")
	_, listen := hostPort(t, "minio --address", addr)
	assert.Equal(t, ep.Port(), strconv.Itoa(listen), "MinIO must listen where the endpoint says")

	for _, name := range blobServices {
		s := service(t, p, name)
		raw := env(t, s, "BLOB_URL")
		u, err := url.Parse(raw)
		require.NoError(t, err, "%s: BLOB_URL", name)
		assert.Equal(t, "s3", u.Scheme, "%s: BLOB_URL %q", name, raw)
		assert.Equal(t, bucket, u.Host, "%s: BLOB_URL must name the bucket %s creates", name, blobSetupJob)
		q := u.Query()
		assert.Equal(t, endpoint, q.Get("endpoint"), "%s: BLOB_URL endpoint", name)
		assert.Equal(t, "true", q.Get("use_path_style"), "%s: MinIO needs path-style addressing (no bucket DNS names)", name)
		assert.NotEmpty(t, q.Get("region"), "%s: BLOB_URL region", name)

		assert.Equal(t, env(t, job, "BLOB_ACCESS_KEY_ID"), env(t, s, "AWS_ACCESS_KEY_ID"), "%s: the MinIO user the setup job creates", name)
		assert.Equal(t, requiredVars["BLOB_SECRET_ACCESS_KEY"], env(t, s, "AWS_SECRET_ACCESS_KEY"), "%s: ${BLOB_SECRET_ACCESS_KEY}", name)
		assert.Equal(t, requiredVars["BLOB_SECRET_ACCESS_KEY"], env(t, job, "BLOB_SECRET_ACCESS_KEY"))
		assert.NotEqual(t, env(t, minio, "MINIO_ROOT_USER"), env(t, s, "AWS_ACCESS_KEY_ID"), "%s must not hold MinIO's root credentials", name)

		require.Contains(t, s.DependsOn, blobSetupJob, "%s must wait for the bucket", name)
		assert.Equal(t, types.ServiceConditionCompletedSuccessfully, s.DependsOn[blobSetupJob].Condition, name)
		assert.True(t, sharesNetwork(s, minio), "%s and %s must share a network", name, blobService)
	}
	// Only the services that open the bucket hold its credentials.
	for _, s := range p.AllServices() {
		if slicesContains(blobServices, s.Name) {
			continue
		}
		for _, key := range []string{"BLOB_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			_, ok := s.Environment[key]
			assert.False(t, ok, "%s has %s but does not open the document store", s.Name, key)
		}
	}

	assertRequired(t, "BLOB_SECRET_ACCESS_KEY")
}

// TestBlobURLOpensWithS3Blob opens the compose file's BLOB_URL with
// gocloud's s3blob URL opener, as the worker does, so a misspelt or unknown
// parameter fails here (s3blob rejects unknown ones). Opening makes no
// network call; then the same URL, its endpoint moved to a local fake S3,
// shows the requests are path-style and signed with the key from the
// environment.
func TestBlobURLOpensWithS3Blob(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")
	raw := env(t, w, "BLOB_URL")

	// The SDK reads its credentials from the environment; nothing from the
	// developer's own AWS setup may leak in.
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_REGION":                  "",
		"AWS_DEFAULT_REGION":          "",
		"AWS_SESSION_TOKEN":           "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
	for k, v := range w.Environment {
		if strings.HasPrefix(k, "AWS_") && v != nil {
			t.Setenv(k, *v)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := blob.OpenBucket(ctx, raw)
	require.NoError(t, err, "s3blob must accept BLOB_URL %q", raw)
	require.NoError(t, b.Close())

	t.Run("a misspelt parameter is rejected", func(t *testing.T) {
		bad := strings.Replace(raw, "use_path_style=", "use_path_styl=", 1)
		require.NotEqual(t, raw, bad, "mutation target vanished; update this test")
		b, err := blob.OpenBucket(ctx, bad)
		if err == nil {
			b.Close()
		}
		assert.Error(t, err)
	})

	t.Run("requests are path-style and signed with the environment's key", func(t *testing.T) {
		var mu sync.Mutex
		var seen []*http.Request
		fake := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Clone(context.Background()))
			mu.Unlock()
			rw.WriteHeader(http.StatusNotFound) // HEAD of a missing object
		}))
		defer fake.Close()

		u, err := url.Parse(raw)
		require.NoError(t, err)
		q := u.Query()
		q.Set("endpoint", fake.URL)
		u.RawQuery = q.Encode()
		b, err := blob.OpenBucket(ctx, u.String())
		require.NoError(t, err)
		defer b.Close()
		ok, err := b.Exists(ctx, "claim-0042/photo.jpg")
		require.NoError(t, err)
		assert.False(t, ok)

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, seen, "no request reached the fake S3")
		r := seen[0]
		fakeURL, _ := url.Parse(fake.URL)
		assert.Equal(t, fakeURL.Host, r.Host, "path-style: the bucket is not a host name")
		assert.Equal(t, "/"+u.Host+"/claim-0042/photo.jpg", r.URL.Path, "path-style: /bucket/key")
		assert.Contains(t, r.Header.Get("Authorization"), "Credential="+env(t, w, "AWS_ACCESS_KEY_ID")+"/",
			"signed with AWS_ACCESS_KEY_ID from the worker's environment")
		assert.Contains(t, r.Header.Get("Authorization"), "/"+q.Get("region")+"/s3/", "signed for the URL's region")
	})
}

// MinIO and its setup job: pinned images, the root password from the
// environment, data on a volume only MinIO mounts, nothing published.
func TestMinIOServices(t *testing.T) {
	p := loadRepo(t)
	minio := service(t, p, blobService)
	job := service(t, p, blobSetupJob)

	// MinIO's Docker Hub repositories are gone; quay.io keeps its images.
	assert.Regexp(t, `^quay\.io/minio/minio:RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$`, minio.Image)
	assert.Regexp(t, `^quay\.io/minio/mc:RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$`, job.Image)
	for _, s := range []types.ServiceConfig{minio, job} {
		assert.Empty(t, checkImageRef(s.Image, false), "%s image %q", s.Name, s.Image)
	}

	assert.Equal(t, requiredVars["MINIO_ROOT_PASSWORD"], env(t, minio, "MINIO_ROOT_PASSWORD"))
	assert.NotEmpty(t, env(t, minio, "MINIO_ROOT_USER"))
	_, file := minio.Environment["MINIO_ROOT_PASSWORD_FILE"]
	assert.False(t, file, "a password file would override MINIO_ROOT_PASSWORD")
	require.GreaterOrEqual(t, len(minio.Command), 2, "command: server DIR")
	assert.Equal(t, "server", minio.Command[0])
	dataDir := minio.Command[1]
	vol := namedVolumeAt(minio, dataDir)
	assert.NotEmpty(t, vol, "MinIO's data (%s) must live on a named volume", dataDir)
	for _, s := range p.AllServices() {
		if s.Name == minio.Name {
			continue
		}
		for _, v := range s.Volumes {
			assert.False(t, v.Type == types.VolumeTypeVolume && v.Source == vol, "%s mounts MinIO's volume", s.Name)
		}
	}
	require.NotNil(t, minio.HealthCheck, "the setup job waits for a healthy MinIO")
	assert.False(t, minio.HealthCheck.Disable)
	assert.Empty(t, minio.Ports, "MinIO is reached over the compose network only")

	assert.Contains(t, []string{"", "no"}, job.Restart, "a one-shot job must not restart, or completed_successfully never fires")
	require.Contains(t, job.DependsOn, blobService)
	assert.Equal(t, types.ServiceConditionHealthy, job.DependsOn[blobService].Condition)
	assert.Equal(t, env(t, minio, "MINIO_ROOT_USER"), env(t, job, "MINIO_ROOT_USER"))
	assert.Equal(t, env(t, minio, "MINIO_ROOT_PASSWORD"), env(t, job, "MINIO_ROOT_PASSWORD"))
	assert.Empty(t, job.Volumes)

	assertRequired(t, "MINIO_ROOT_PASSWORD")
}

// TestMinIOSetupScriptIsIdempotent runs the setup job's real shell script
// with a fake `mc` on PATH: it waits for MinIO, creates the bucket, a policy
// limited to it and the workers' user, and succeeds again on a second run.
func TestMinIOSetupScriptIsIdempotent(t *testing.T) {
	p := loadRepo(t)
	job := service(t, p, blobSetupJob)
	bucket := env(t, job, "BLOB_BUCKET")
	user := env(t, job, "BLOB_ACCESS_KEY_ID")

	fake := `#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls"
case "$1 $2 $3" in
"alias set "*)
	n=$(cat "$FAKE_DIR/aliases" 2>/dev/null || echo 0)
	n=$((n + 1))
	echo "$n" > "$FAKE_DIR/aliases"
	[ "$n" -ge "$FAKE_READY_AFTER" ] ;;
"mb --ignore-existing "*) echo "Bucket created successfully" ;;
"admin policy create") cp "$6" "$FAKE_DIR/policy.json"; echo "Created policy" ;;
"admin user add") echo "Added user" ;;
"admin policy attach")
	case "$FAKE_ATTACH" in
	ok) echo "Attached Policies" ;;
	again) echo "mc: <ERROR> Unable to make user/group policy association. The specified policy change is already in effect." >&2; exit 1 ;;
	*) echo "mc: <ERROR> Unable to make user/group policy association. Access Denied." >&2; exit 1 ;;
	esac ;;
"admin user info")
	if [ "$FAKE_ATTACH" = again ]; then
		echo '{"status":"success","accessKey":"'"$6"'","policyName":"durableclaims-blobs","userStatus":"enabled"}'
	else
		echo '{"status":"success","accessKey":"'"$6"'","userStatus":"enabled"}'
	fi ;;
*) echo "unexpected: $*" >&2; exit 64 ;;
esac
`
	for _, tc := range []struct {
		name       string
		readyAfter int
		attach     string
		wantOK     bool
	}{
		{"fresh MinIO", 1, "ok", true},
		{"MinIO not answering at first", 2, "ok", true},
		{"second run: policy already attached", 1, "again", true},
		{"attach refused", 1, "denied", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			out, err := runJobScript(t, job, "mc", fake, "TMPDIR="+state, "FAKE_DIR="+state,
				"FAKE_READY_AFTER="+strconv.Itoa(tc.readyAfter), "FAKE_ATTACH="+tc.attach)
			if !tc.wantOK {
				require.Error(t, err, "output:\n%s", out)
				return
			}
			require.NoError(t, err, "output:\n%s", out)
			calls, err := os.ReadFile(filepath.Join(state, "calls"))
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
			require.GreaterOrEqual(t, len(lines), tc.readyAfter+4, "calls:\n%s", calls)
			for _, l := range lines[:tc.readyAfter] {
				assert.True(t, strings.HasPrefix(l, "alias set "), l)
				assert.Contains(t, l, " "+env(t, job, "MINIO_ENDPOINT")+" ", "the alias must point at MINIO_ENDPOINT")
			}
			rest := strings.Join(lines[tc.readyAfter:], "\n")
			assert.Contains(t, rest, "mb --ignore-existing ")
			assert.Contains(t, rest, "/"+bucket+"\n")
			assert.Contains(t, rest, "admin user add ")
			assert.Contains(t, rest, " "+user+" "+requiredVars["BLOB_SECRET_ACCESS_KEY"])
			assert.Contains(t, rest, "admin policy attach ")

			// The workers' policy reaches their bucket and nothing else.
			pol, err := os.ReadFile(filepath.Join(state, "policy.json"))
			require.NoError(t, err)
			var doc struct {
				Version   string
				Statement []struct {
					Effect   string
					Action   []string
					Resource []string
				}
			}
			require.NoError(t, json.Unmarshal(pol, &doc), "policy:\n%s", pol)
			assert.Equal(t, "2012-10-17", doc.Version)
			var actions []string
			for _, st := range doc.Statement {
				assert.Equal(t, "Allow", st.Effect)
				for _, r := range st.Resource {
					assert.Contains(t, []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"}, r)
				}
				actions = append(actions, st.Action...)
			}
			for _, a := range []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"} {
				assert.Contains(t, actions, a)
			}
			for _, a := range actions {
				assert.NotContains(t, a, "*", "no wildcard actions")
				assert.False(t, strings.HasPrefix(a, "admin:"), a)
			}
		})
	}
}

// The workers start only when what they need is there: the claims database
// accepts connections (migrations run at worker start), the bucket and the
// workers' MinIO user exist, and Temporal serves the namespace with its
// search attributes.
func TestWorkerStartsAfterItsDependencies(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")
	want := map[string]string{
		claimsDBService:        types.ServiceConditionHealthy,
		blobSetupJob:           types.ServiceConditionCompletedSuccessfully,
		"temporal-admin-tools": types.ServiceConditionCompletedSuccessfully,
		"stripesim":            types.ServiceConditionHealthy,
	}
	for dep, cond := range want {
		require.Contains(t, w.DependsOn, dep)
		assert.Equal(t, cond, w.DependsOn[dep].Condition, "worker depends_on %s", dep)
	}
	// Temporal itself, directly or through the admin job.
	assert.True(t, dependsOn(p, w.Name, "temporal"), "the worker must start after temporal")
	assert.True(t, dependsOn(p, w.Name, blobService))
	assert.True(t, dependsOn(p, w.Name, mailService), "the worker sends mail through %s", mailService)
}

// dependsOn reports whether from depends on to, directly or transitively.
func dependsOn(p *types.Project, from, to string) bool {
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(name string) bool {
		if seen[name] {
			return false
		}
		seen[name] = true
		s, err := p.GetService(name)
		if err != nil {
			return false
		}
		for dep := range s.DependsOn {
			if dep == to || walk(dep) {
				return true
			}
		}
		return false
	}
	return walk(from)
}
