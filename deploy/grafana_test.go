package deploy

// deploy/grafana: the provisioned datasource and dashboard provider, and
// the dashboard's queries and layout.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  *grafanaDS `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // of a collapsed row
}

type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDS      `json:"datasource"`
			Current    struct {
				Value json.RawMessage `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardMetrics are the series the dashboard must chart.
var dashboardMetrics = []string{
	"claims_completed_total", "claim_step_duration_seconds_bucket",
	"claim_history_bytes_bucket", "claim_history_events_bucket", "claim_history_budget_exceeded_total",
	"idempotency_replays_total", "idempotency_conflicts_total", "claim_resumes_total",
	"approvals_waiting", "approvals_escalated_total", "approvals_expired_total",
	"reconciliation_discrepancies_total", "reconciliation_last_run_unmatched",
	"go_goroutines", "process_resident_memory_bytes", "up",
	"temporal_activity_execution_latency_seconds_bucket", "temporal_activity_execution_failed_total",
	"temporal_activity_schedule_to_start_latency_seconds_bucket", "temporal_worker_task_slots_available",
}

var labelValuesQuery = regexp.MustCompile(`^\s*label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// checkDashboard checks a dashboard JSON: its uid, that every panel queries
// the Prometheus datasource dsUID (directly or through the DS_PROMETHEUS
// variable) with expressions over known metrics, and that panels do not
// overlap. It returns the metrics the panels read.
func checkDashboard(doc []byte, dsUID string) (read map[string]bool, problems []string) {
	var d grafanaDashboard
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, []string{err.Error()}
	}
	if d.UID != dashboardUID {
		problems = append(problems, fmt.Sprintf("uid %q, want %q", d.UID, dashboardUID))
	}
	if d.Title == "" {
		problems = append(problems, "no title")
	}
	if d.SchemaVersion < 36 {
		problems = append(problems, fmt.Sprintf("schemaVersion %d predates datasource uids (36)", d.SchemaVersion))
	}
	read = map[string]bool{}
	vars := map[string]string{} // datasource variable -> uid it selects
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			_ = json.Unmarshal(v.Query, &q)
			if q != "prometheus" {
				problems = append(problems, fmt.Sprintf("variable %s: datasource type %q, want prometheus", v.Name, q))
			}
			var cur string
			_ = json.Unmarshal(v.Current.Value, &cur)
			vars[v.Name] = cur
		case "query":
			var q string
			if json.Unmarshal(v.Query, &q) != nil {
				var obj struct{ Query string }
				_ = json.Unmarshal(v.Query, &obj)
				q = obj.Query
			}
			m := labelValuesQuery.FindStringSubmatch(q)
			if m == nil {
				problems = append(problems, fmt.Sprintf("variable %s: query %q is not label_values(selector, label)", v.Name, q))
				continue
			}
			metrics, ps := checkPromQL(m[1])
			for _, p := range ps {
				problems = append(problems, fmt.Sprintf("variable %s: %s", v.Name, p))
			}
			for _, mt := range metrics {
				if _, ok := knownMetrics[mt][m[2]]; !ok {
					problems = append(problems, fmt.Sprintf("variable %s: %s has no label %q", v.Name, mt, m[2]))
				}
			}
		}
	}
	// resolve returns the uid a panel's datasource selects: literal, or the
	// current value of a datasource variable ($NAME or ${NAME}).
	resolve := func(ds *grafanaDS) string {
		uid, name := ds.UID, ""
		switch {
		case strings.HasPrefix(uid, "${") && strings.HasSuffix(uid, "}"):
			name = uid[2 : len(uid)-1]
		case strings.HasPrefix(uid, "$"):
			name = uid[1:]
		default:
			return uid
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return "undefined variable " + uid
	}
	badDS := map[string]bool{}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var rects []rect
	ids := map[int]bool{}
	var walk func(panels []grafanaPanel, top bool)
	walk = func(panels []grafanaPanel, top bool) {
		for _, p := range panels {
			if ids[p.ID] {
				problems = append(problems, fmt.Sprintf("panel id %d used twice", p.ID))
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				problems = append(problems, fmt.Sprintf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g))
			}
			if top {
				for _, r := range rects {
					if g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H {
						problems = append(problems, fmt.Sprintf("panels %q and %q overlap", r.title, p.Title))
					}
				}
				rects = append(rects, rect{p.Title, g.X, g.Y, g.W, g.H})
			}
			if p.Type == "row" {
				walk(p.Panels, false)
				continue
			}
			if p.Title == "" {
				problems = append(problems, fmt.Sprintf("panel %d has no title", p.ID))
			}
			if len(p.Targets) == 0 {
				problems = append(problems, fmt.Sprintf("panel %q has no queries", p.Title))
			}
			for _, tg := range p.Targets {
				ds := tg.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				if ds == nil || ds.Type != "prometheus" || resolve(ds) != dsUID {
					what := fmt.Sprintf("%+v", ds)
					if ds != nil {
						what = fmt.Sprintf("%s %q (resolves to %q)", ds.Type, ds.UID, resolve(ds))
					}
					if !badDS[what] {
						badDS[what] = true
						problems = append(problems, fmt.Sprintf("panel %q query %s (and maybe others): datasource %s is not the provisioned prometheus %q",
							p.Title, tg.RefID, what, dsUID))
					}
				}
				metrics, ps := checkPromQL(tg.Expr)
				for _, pr := range ps {
					problems = append(problems, fmt.Sprintf("panel %q query %s: %s", p.Title, tg.RefID, pr))
				}
				for _, m := range metrics {
					read[m] = true
				}
			}
		}
	}
	walk(d.Panels, true)
	for _, m := range dashboardMetrics {
		if !read[m] {
			problems = append(problems, fmt.Sprintf("no panel charts %s", m))
		}
	}
	return read, problems
}

type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		UID       string         `yaml:"uid"`
		Type      string         `yaml:"type"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
	DeleteDatasources yaml.Node `yaml:"deleteDatasources"`
}

type grafanaProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		FolderUID             string `yaml:"folderUid"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

func TestGrafanaProvisioning(t *testing.T) {
	root := repoRoot(t)
	p := loadRepo(t)
	graf := service(t, p, "grafana")
	prom := service(t, p, "prometheus")

	var ds grafanaDatasources
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(grafanaDir, "provisioning", "datasources", "prometheus.yml")), &ds))
	assert.Equal(t, 1, ds.APIVersion)
	require.Len(t, ds.Datasources, 1)
	d := ds.Datasources[0]
	assert.Equal(t, "prometheus", d.Type)
	assert.Equal(t, datasourceUID, d.UID, "the dashboard's datasource uid")
	assert.Equal(t, "proxy", d.Access, "the browser cannot resolve compose service names; grafana must proxy")
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	assert.Equal(t, "http", u.Scheme)
	assert.Equal(t, prom.Name, u.Hostname(), "datasource must point at the prometheus service")
	_, listen := hostPort(t, "--web.listen-address", flagValue(prom.Command, "web.listen-address", "0.0.0.0:9090"))
	assert.Equal(t, strconv.Itoa(listen), u.Port(), "datasource port must be the one prometheus listens on inside the network")
	var cfg promConfig
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), &cfg))
	assert.Equal(t, cfg.Global.ScrapeInterval, d.JSONData["timeInterval"], "timeInterval must match the scrape interval for $__rate_interval")

	var prov grafanaProviders
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(grafanaDir, "provisioning", "dashboards", "durableclaims.yml")), &prov))
	assert.Equal(t, 1, prov.APIVersion)
	require.Len(t, prov.Providers, 1)
	pr := prov.Providers[0]
	assert.Equal(t, "file", pr.Type)
	host, ro := hostPath(graf, pr.Options.Path)
	assert.Equal(t, filepath.Join(root, filepath.Dir(dashboardRel)), host,
		"provider path %s must be where compose mounts deploy/grafana/dashboards", pr.Options.Path)
	assert.True(t, ro, "dashboards must be mounted read-only")
	assert.FileExists(t, filepath.Join(host, filepath.Base(dashboardRel)))
	assert.False(t, pr.AllowUIUpdates, "provisioned from the repo: UI edits would be lost on restart")
}

func TestDashboard(t *testing.T) {
	_, problems := checkDashboard(readRepoFile(t, dashboardRel), datasourceUID)
	assert.Empty(t, problems)
}
