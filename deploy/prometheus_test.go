package deploy

// deploy/prometheus: prometheus.yml scrapes every worker replica, and
// alerts.yml holds the expected alerts, read by Prometheus' rule file parser.

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type promConfig struct {
	Global struct {
		ScrapeInterval     string            `yaml:"scrape_interval"`
		ScrapeTimeout      string            `yaml:"scrape_timeout"`
		EvaluationInterval string            `yaml:"evaluation_interval"`
		ExternalLabels     map[string]string `yaml:"external_labels"`
	} `yaml:"global"`
	RuleFiles     []string     `yaml:"rule_files"`
	Alerting      yaml.Node    `yaml:"alerting"`
	ScrapeConfigs []promScrape `yaml:"scrape_configs"`
}

type promScrape struct {
	JobName        string `yaml:"job_name"`
	MetricsPath    string `yaml:"metrics_path"`
	Scheme         string `yaml:"scheme"`
	ScrapeInterval string `yaml:"scrape_interval"`
	ScrapeTimeout  string `yaml:"scrape_timeout"`
	DNSSDConfigs   []struct {
		Names           []string `yaml:"names"`
		Type            string   `yaml:"type"`
		Port            int      `yaml:"port"`
		RefreshInterval string   `yaml:"refresh_interval"`
	} `yaml:"dns_sd_configs"`
	StaticConfigs []struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels"`
	} `yaml:"static_configs"`
	RelabelConfigs       yaml.Node `yaml:"relabel_configs"`
	MetricRelabelConfigs yaml.Node `yaml:"metric_relabel_configs"`
}

// checkPromConfig checks that prometheus.yml scrapes every replica of the
// worker service on its metrics port every 15 s.
func checkPromConfig(doc []byte, workerService string, metricsPort int) (cfg promConfig, problems []string) {
	if err := decodeStrict(doc, &cfg); err != nil {
		return cfg, []string{err.Error()}
	}
	var jobs []promScrape
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == workerJob {
			jobs = append(jobs, sc)
		}
	}
	if len(jobs) != 1 {
		return cfg, []string{fmt.Sprintf("want one scrape job %q, have %d", workerJob, len(jobs))}
	}
	job := jobs[0]
	interval := job.ScrapeInterval
	if interval == "" {
		interval = cfg.Global.ScrapeInterval
	}
	if d, err := model.ParseDuration(interval); err != nil || time.Duration(d) != 15*time.Second {
		problems = append(problems, fmt.Sprintf("job %s scrapes every %q, want 15s", workerJob, interval))
	}
	if job.MetricsPath != "" && job.MetricsPath != "/metrics" {
		problems = append(problems, fmt.Sprintf("metrics_path %q: the worker serves /metrics", job.MetricsPath))
	}
	if job.Scheme != "" && job.Scheme != "http" {
		problems = append(problems, fmt.Sprintf("scheme %q: the worker serves plain http", job.Scheme))
	}
	if len(job.StaticConfigs) > 0 {
		problems = append(problems, "static targets reach one replica only; discover the replicas with dns_sd_configs")
	}
	if len(job.DNSSDConfigs) == 0 {
		problems = append(problems, "no dns_sd_configs: the replicas are not discovered")
	}
	for _, sd := range job.DNSSDConfigs {
		// Compose's DNS serves A records per replica, no SRV records, and
		// Prometheus' default type is SRV.
		if sd.Type != "A" {
			problems = append(problems, fmt.Sprintf("dns_sd type %q: compose DNS answers A records", sd.Type))
		}
		if sd.Port != metricsPort {
			problems = append(problems, fmt.Sprintf("dns_sd port %d, but the worker's METRICS_ADDR listens on %d", sd.Port, metricsPort))
		}
		if len(sd.Names) != 1 || sd.Names[0] != workerService {
			problems = append(problems, fmt.Sprintf("dns_sd names %v, want [%s]", sd.Names, workerService))
		}
	}
	if len(cfg.RuleFiles) == 0 {
		problems = append(problems, "no rule_files: alerts are not loaded")
	}
	return cfg, problems
}

// alertSpecs lists the alerts alerts.yml must define: severity, the
// metrics each must read, and its `for` (empty: fires at once).
var alertSpecs = map[string]struct {
	severity string
	reads    []string
	forDur   string
}{
	"IdempotencyConflict":            {"critical", []string{"idempotency_conflicts_total"}, ""},
	"ActivityRefused":                {"critical", []string{"activity_refusals_total"}, ""},
	"DeploymentRoutedToUnknownBuild": {"critical", []string{"deployment_unknown_builds"}, ""},
	"ForeignWorkflowTask":            {"critical", []string{"foreign_workflow_tasks_total"}, ""},
	"ClaimsDeadLettered":             {"warning", []string{"claims_completed_total"}, ""},
	"StatutoryDeadlineBreached":      {"warning", []string{"statutory_breaches_total"}, ""},
	"DependencyDown":                 {"warning", []string{"dependency_waits_total"}, ""},
	"PaymentDiscrepancy":             {"critical", []string{"reconciliation_last_run_unmatched", "reconciliation_discrepancies_total"}, ""},
	"ApprovalsPastDeadline":          {"warning", []string{"approvals_waiting"}, "1h"},
	"ResumeRateHigh":                 {"warning", []string{"claim_resumes_total", "claims_completed_total"}, "15m"},
	"HistoryBudgetExceeded":          {"warning", []string{"claim_history_budget_exceeded_total"}, ""},
	"ModelAnswersUnusable":           {"warning", []string{"triage_reviews_total"}, ""},
	"WorkerDown":                     {"critical", []string{"up"}, "1m"},
	"WorkersAbsent":                  {"critical", []string{"up"}, "2m"},
}

// checkRules checks an alert rule file: Prometheus' own rule file parser
// (rulefmt, as `promtool check rules` runs it) must accept it, with unknown
// fields, unparsable expressions, durations and annotation templates as
// errors; then the expected alerts, each with a severity, a summary and a
// runbook description, over known metrics only. It returns the metrics the
// rules read.
func checkRules(doc []byte) (read map[string]bool, problems []string) {
	var warnings bytes.Buffer
	rf, errs := rulefmt.Parse(doc, false, model.LegacyValidation, promParser, slog.New(slog.NewTextHandler(&warnings, nil)))
	for _, err := range errs {
		if !slicesContains(problems, err.Error()) { // a YAML error comes twice
			problems = append(problems, err.Error())
		}
	}
	if warnings.Len() > 0 {
		// Such as a second YAML document, which Prometheus ignores.
		problems = append(problems, strings.TrimSpace(warnings.String()))
	}
	if rf == nil {
		sort.Strings(problems)
		return nil, problems
	}
	read = map[string]bool{}
	seen := map[string]int{}
	for _, g := range rf.Groups {
		if g.Name == "" {
			problems = append(problems, "a rule group without a name")
		}
		for _, r := range g.Rules {
			if r.Alert == "" || r.Record != "" {
				problems = append(problems, fmt.Sprintf("rule %q%q: only alerting rules expected", r.Alert, r.Record))
				continue
			}
			seen[r.Alert]++
			metrics, ps := checkPromQL(r.Expr)
			for _, p := range ps {
				problems = append(problems, fmt.Sprintf("%s: %s", r.Alert, p))
			}
			for _, m := range metrics {
				read[m] = true
			}
			for _, key := range []string{"summary", "description"} {
				text := strings.TrimSpace(r.Annotations[key])
				if text == "" {
					problems = append(problems, fmt.Sprintf("%s: no %s annotation", r.Alert, key))
				}
				if strings.Count(text, "{{") != strings.Count(text, "}}") {
					problems = append(problems, fmt.Sprintf("%s: %s has unbalanced {{ }}", r.Alert, key))
				}
			}
			spec, ok := alertSpecs[r.Alert]
			if !ok {
				problems = append(problems, fmt.Sprintf("unexpected alert %s: add it to alertSpecs", r.Alert))
				continue
			}
			if r.Labels["severity"] != spec.severity {
				problems = append(problems, fmt.Sprintf("%s: severity %q, want %q", r.Alert, r.Labels["severity"], spec.severity))
			}
			forDur := "" // rulefmt has parsed it; 0 is no `for`
			if r.For != 0 {
				forDur = r.For.String()
			}
			if forDur != spec.forDur {
				problems = append(problems, fmt.Sprintf("%s: for %q, want %q", r.Alert, forDur, spec.forDur))
			}
			for _, m := range spec.reads {
				if !slicesContains(metrics, m) {
					problems = append(problems, fmt.Sprintf("%s: must read %s", r.Alert, m))
				}
			}
		}
	}
	for name := range alertSpecs {
		if seen[name] != 1 {
			problems = append(problems, fmt.Sprintf("alert %s defined %d times, want once", name, seen[name]))
		}
	}
	sort.Strings(problems)
	return read, problems
}

func TestPrometheusConfig(t *testing.T) {
	p := loadRepo(t)
	_, problems := checkPromConfig(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), "worker", workerMetricsPort(t, p))
	assert.Empty(t, problems)
	_, err := p.GetService("worker")
	require.NoError(t, err, "the DNS name prometheus resolves must be the worker service")
}

func TestAlertRules(t *testing.T) {
	read, problems := checkRules(readRepoFile(t, filepath.Join(promDir, "alerts.yml")))
	assert.Empty(t, problems)
	// An operator sent by an alert to the dashboard must find the series there.
	onDashboard, _ := checkDashboard(readRepoFile(t, dashboardRel), datasourceUID)
	for m := range read {
		assert.True(t, onDashboard[m], "alerts read %s but no dashboard panel charts it", m)
	}
}
