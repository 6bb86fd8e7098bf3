package deploy

// The monitoring services in docker-compose.yml, and proof that each check
// of the monitoring files rejects a broken copy of them.

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	workerJob     = "worker"        // scrape job of the worker replicas in prometheus.yml
	dashboardUID  = "durableclaims" // deploy/grafana/dashboards/durableclaims.json
	datasourceUID = "prometheus"    // provisioned Prometheus datasource
)

var (
	promDir      = filepath.Join("deploy", "prometheus")
	grafanaDir   = filepath.Join("deploy", "grafana")
	dashboardRel = filepath.Join(grafanaDir, "dashboards", "durableclaims.json")
)

// workerMetricsPort is the port the worker's METRICS_ADDR listens on, on
// all interfaces and exposed to the compose network.
func workerMetricsPort(t *testing.T, p *types.Project) int {
	t.Helper()
	w := service(t, p, "worker")
	host, port := hostPort(t, "METRICS_ADDR", env(t, w, "METRICS_ADDR"))
	assert.Contains(t, []string{"0.0.0.0", "", "::"}, host, "the worker must serve metrics on all interfaces, or prometheus cannot reach it")
	assert.Contains(t, []string(w.Expose), strconv.Itoa(port), "worker must expose its metrics port")
	return port
}

func TestMonitoringServices(t *testing.T) {
	root := repoRoot(t)
	def := loadRepoDefault(t)
	for _, name := range []string{"prometheus", "grafana"} {
		assert.Contains(t, def.ServiceNames(), name, "`docker compose up` must start %s", name)
	}

	p := loadRepo(t)
	workerMetricsPort(t, p)

	prom := service(t, p, "prometheus")
	assert.Regexp(t, `^prom/prometheus:v3\.\d+\.\d+$`, prom.Image)
	cfgPath := flagValue(prom.Command, "config.file", "/etc/prometheus/prometheus.yml")
	host, ro := hostPath(prom, cfgPath)
	assert.Equal(t, filepath.Join(root, promDir, "prometheus.yml"), host, "prometheus must load deploy/prometheus/prometheus.yml")
	assert.True(t, ro, "prometheus config must be mounted read-only")
	assert.True(t, mountsNamedVolume(prom, flagValue(prom.Command, "storage.tsdb.path", "/prometheus")), "TSDB on a named volume")
	_, listen := hostPort(t, "--web.listen-address", flagValue(prom.Command, "web.listen-address", "0.0.0.0:9090"))
	assert.True(t, publishesTarget(prom, listen), "prometheus must publish its UI port %d", listen)
	assert.NotContains(t, prom.DependsOn, "worker", "monitoring must start even when the workers cannot (WorkerDown)")
	require.NotNil(t, prom.HealthCheck, "grafana waits for a healthy prometheus")

	// rule_files resolve, through the mounts, to files in the repo.
	var cfg promConfig
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), &cfg))
	var rules []string
	for _, rf := range cfg.RuleFiles {
		if !strings.HasPrefix(rf, "/") {
			rf = filepath.ToSlash(filepath.Join(filepath.Dir(cfgPath), rf))
		}
		h, _ := hostPath(prom, rf)
		require.NotEmpty(t, h, "rule file %s is not mounted into prometheus", rf)
		matches, err := filepath.Glob(h)
		require.NoError(t, err)
		assert.NotEmpty(t, matches, "rule file %s (%s) does not exist", rf, h)
		rules = append(rules, matches...)
	}
	assert.Contains(t, rules, filepath.Join(root, promDir, "alerts.yml"))

	graf := service(t, p, "grafana")
	assert.Regexp(t, `^grafana/grafana:11\.\d+\.\d+$`, graf.Image)
	require.Contains(t, graf.DependsOn, "prometheus")
	assert.Equal(t, types.ServiceConditionHealthy, graf.DependsOn["prometheus"].Condition)
	assert.True(t, publishes(graf, 3000), "grafana must publish 3000")
	provDir := "/etc/grafana/provisioning"
	if v, ok := graf.Environment["GF_PATHS_PROVISIONING"]; ok && v != nil {
		provDir = *v
	}
	host, ro = hostPath(graf, provDir)
	assert.Equal(t, filepath.Join(root, grafanaDir, "provisioning"), host, "grafana provisioning must come from deploy/grafana/provisioning")
	assert.True(t, ro, "provisioning must be mounted read-only")
	if v, ok := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; ok && v != nil {
		host, _ := hostPath(graf, *v)
		assert.Equal(t, filepath.Join(root, dashboardRel), host, "the home dashboard must be the mounted durableclaims.json")
	}
}

// Each check above must reject a broken file, so it cannot pass vacuously.
func TestMonitoringChecksRejectBrokenFiles(t *testing.T) {
	mutate := func(t *testing.T, doc []byte, old, new string) []byte {
		t.Helper()
		require.Contains(t, string(doc), old, "mutation target vanished; update this test")
		return []byte(strings.Replace(string(doc), old, new, 1))
	}

	prom := readRepoFile(t, filepath.Join(promDir, "prometheus.yml"))
	_, problems := checkPromConfig(prom, "worker", 9090)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"wrong port":      {"port: 9090", "port: 9100"},
		"SRV lookup":      {"type: A", "type: SRV"},
		"misspelt key":    {"dns_sd_configs:", "dns_sd_config:"},
		"wrong interval":  {"scrape_interval: 15s", "scrape_interval: 1m"},
		"other job name":  {"job_name: worker", "job_name: workers"},
		"not the service": {`names: ["worker"]`, `names: ["tasks.worker"]`},
	} {
		t.Run("prometheus.yml "+name, func(t *testing.T) {
			_, problems := checkPromConfig(mutate(t, prom, m[0], m[1]), "worker", 9090)
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}

	alerts := readRepoFile(t, filepath.Join(promDir, "alerts.yml"))
	_, problems = checkRules(alerts)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"unknown metric":    {"max(reconciliation_last_run_unmatched)", "max(reconciliation_unmatched)"},
		"bad label value":   {`status="dead-lettered"}[15m]`, `status="dead_lettered"}[15m]`},
		"missing alert":     {"alert: WorkerDown", "alert: WorkerGone"},
		"wrong severity":    {"severity: critical", "severity: page"},
		"no summary":        {"summary:", "summry:"},
		"unbalanced parens": {"max(approvals_waiting{", "max((approvals_waiting{"},
		// Caught by Prometheus' rule file parser (rulefmt) and PromQL parser.
		"type error":     {"max(approvals_waiting{", "rate(approvals_waiting{"},
		"template error": {"{{ $value | humanizePercentage }}", "{{ $value | humanisePercentage }}"},
		"unknown field":  {"    labels:\n          severity: warning", "    label:\n          severity: warning"},
		"invalid for":    {"for: 1h", "for: 1 hour"},
		"recording rule": {"alert: WorkersAbsent", "record: WorkersAbsent"},
	} {
		t.Run("alerts.yml "+name, func(t *testing.T) {
			_, problems := checkRules(mutate(t, alerts, m[0], m[1]))
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}

	dash := readRepoFile(t, dashboardRel)
	_, problems = checkDashboard(dash, datasourceUID)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"uid":                {`"uid": "durableclaims"`, `"uid": "claims"`},
		"double unit suffix": {"(rate(claim_history_bytes_bucket", "(rate(claim_history_bytes_bytes_bucket"},
		"unknown function":   {"histogram_quantile(", "histogram_quantil("},
		"datasource uid":     {`"value": "prometheus"`, `"value": "prom"`},
		"not json":           {"{", "{,"},
		"unknown label":      {"sum by (status)", "sum by (state)"},
		"variable query":     {`"query": "label_values(up{job=\"worker\"}, instance)"`, `"query": "label_values(up{job=\"worker\"}, pod)"`},
		"no range":           {"}[$__rate_interval]", "}"},
	} {
		t.Run("dashboard "+name, func(t *testing.T) {
			_, problems := checkDashboard(mutate(t, dash, m[0], m[1]), datasourceUID)
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}
}
