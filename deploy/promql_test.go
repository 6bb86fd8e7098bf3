package deploy

// The PromQL checks shared by the alert rules and the dashboard: Prometheus'
// own parser, then the series, labels and values the worker exports.

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
)

// promFunctions are the PromQL functions and aggregations the files may
// call. Prometheus' parser rejects a function it does not know; this list
// is narrower on purpose: a function outside it (one newer than the
// deployed server, say) must be added here deliberately.
var promFunctions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`sum min max avg count count_values stddev stdvar topk bottomk quantile group
		rate irate increase delta idelta deriv resets changes histogram_quantile absent absent_over_time
		vector scalar time timestamp clamp clamp_min clamp_max abs ceil floor round sqrt exp ln log2 log10
		sort sort_desc label_replace label_join predict_linear
		avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time quantile_over_time`) {
		promFunctions[f] = true
	}
}

var plainLabelValue = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// promParser parses PromQL with Prometheus' own parser, as the deployed
// server does: experimental functions and syntax off, their default.
var promParser = parser.NewParser(parser.Options{})

// grafanaVariable matches a Grafana variable, $name or ${name}.
var grafanaVariable = regexp.MustCompile(`\$(?:\{(\w+)\}|(\w+))`)

// grafanaBuiltins are sample values of Grafana's built-in interval and
// range variables, which Grafana substitutes, wherever they stand, before a
// query reaches Prometheus. The dashboard's own variables are not
// substituted: inside a string ("$instance") they are a literal to the
// parser and their values go unchecked; outside one they are a parse error.
var grafanaBuiltins = map[string]string{
	"__interval": "1m", "__interval_ms": "60000",
	"__rate_interval": "1m", "__rate_interval_ms": "60000",
	"__range": "1h", "__range_s": "3600", "__range_ms": "3600000",
}

// interpolateGrafana substitutes Grafana's built-in variables in expr.
func interpolateGrafana(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVariable.FindStringSubmatch(v)
		if val, ok := grafanaBuiltins[m[1]+m[2]]; ok {
			return val
		}
		return v
	})
}

// parseErrorKinds name, after the parser's own message, the mistakes that
// the checks have always reported in these words.
var parseErrorKinds = []struct{ parser, kind string }{
	{"inside braces", "the selector is not closed"},
	{"in label matching", "malformed label matcher"},
	{"unexpected right parenthesis", "unbalanced brackets"},
	{"unexpected right bracket", "unbalanced brackets"},
	{"unexpected character: '}'", "unbalanced brackets"},
	{"'$'", "a Grafana variable outside a string: only Grafana's built-in interval and range variables are substituted"},
}

// parseProblems turns a parse error into problems, one per error found.
func parseProblems(err error) []string {
	var errs parser.ParseErrors
	if !errors.As(err, &errs) {
		return []string{err.Error()}
	}
	var problems []string
	for _, e := range errs {
		msg := e.Error()
		for _, k := range parseErrorKinds {
			if strings.Contains(msg, k.parser) {
				msg += " (" + k.kind + ")"
				break
			}
		}
		problems = append(problems, msg)
	}
	return problems
}

// metricsIn returns the metric names that the selectors in nodes read, each once.
func metricsIn(nodes ...parser.Node) []string {
	var names []string
	for _, n := range nodes {
		parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" && !slicesContains(names, vs.Name) {
				names = append(names, vs.Name)
			}
			return nil
		})
	}
	return names
}

// checkGrouping reports the labels of a grouping (by, without, on,
// ignoring, group_left/right) that none of the known metrics read under
// the grouping's operands carries.
func checkGrouping(grouping []string, operands ...parser.Node) (problems []string) {
	if len(grouping) == 0 {
		return nil
	}
	metrics := metricsIn(operands...)
	allowed := map[string]bool{}
	for _, m := range metrics {
		for l := range knownMetrics[m] {
			allowed[l] = true
		}
	}
	for _, g := range grouping {
		if len(allowed) > 0 && !allowed[g] {
			problems = append(problems, fmt.Sprintf("grouping label %q is on none of %v", g, metrics))
		}
	}
	return problems
}

// checkSelector reports an unknown metric, labels it does not have, and
// label values the worker never exports.
func checkSelector(vs *parser.VectorSelector) (problems []string) {
	known, ok := knownMetrics[vs.Name]
	if !ok {
		return []string{fmt.Sprintf("unknown metric %q", vs.Name)}
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		values, ok := known[m.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no label %q", vs.Name, m.Name))
			continue
		}
		if values == nil || strings.Contains(m.Value, "$") {
			continue
		}
		op := m.Type.String()
		alts := []string{m.Value}
		if op == "=~" || op == "!~" {
			alts = strings.Split(m.Value, "|")
		}
		for _, v := range alts {
			if (op == "=" || op == "!=" || plainLabelValue.MatchString(v)) && !slicesContains(values, v) {
				problems = append(problems, fmt.Sprintf("%s{%s}: %q is not one of %v", vs.Name, m.Name, v, values))
			}
		}
	}
	return problems
}

// checkPromQL parses expr (with Grafana's built-in variables substituted)
// with Prometheus' parser and returns the metrics it reads and what is
// wrong with it: a parse error (syntax, unknown function, argument types),
// a selector without a metric name, unknown metrics, labels or grouping
// labels, label values the worker never exports, and functions outside
// promFunctions.
func checkPromQL(expr string) (metrics []string, problems []string) {
	e, err := promParser.ParseExpr(interpolateGrafana(expr))
	if err != nil {
		return nil, parseProblems(err)
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			if n.Name == "" {
				hint := ""
				for _, m := range n.LabelMatchers {
					if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
						hint = fmt.Sprintf(" (write %s{...})", m.Value)
					}
				}
				problems = append(problems, fmt.Sprintf("%s: a selector without a metric name%s", n, hint))
				return nil
			}
			metrics = append(metrics, n.Name)
			problems = append(problems, checkSelector(n)...)
		case *parser.Call:
			if !promFunctions[n.Func.Name] {
				problems = append(problems, fmt.Sprintf("function %q is not in promFunctions, the functions these files may call", n.Func.Name))
			}
		case *parser.AggregateExpr:
			if op := n.Op.String(); !promFunctions[op] {
				problems = append(problems, fmt.Sprintf("aggregation %q is not in promFunctions, the functions these files may call", op))
			}
			problems = append(problems, checkGrouping(n.Grouping, n.Expr)...)
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				problems = append(problems, checkGrouping(vm.MatchingLabels, n.LHS, n.RHS)...)
				problems = append(problems, checkGrouping(vm.Include, n.LHS, n.RHS)...)
			}
		}
		return nil
	})
	if len(metrics) == 0 && len(problems) == 0 {
		problems = append(problems, "reads no metric")
	}
	return metrics, problems
}

func TestPromQLChecker(t *testing.T) {
	good := []string{
		`sum by (tool) (increase(idempotency_conflicts_total[15m])) > 0 or sum by (tool) (idempotency_conflicts_total unless idempotency_conflicts_total offset 15m) > 0`,
		`histogram_quantile(0.95, sum by (le, step) (rate(claim_history_bytes_bucket{job="worker", instance=~"$instance"}[$__rate_interval])))`,
		`sum(rate(claim_resumes_total{kind="activity"}[15m])) / sum(rate(claims_completed_total[15m])) > 0.2`,
		`absent(up{job="worker"} == 1)`,
		`60 * sum by (tool, by) (rate(idempotency_replays_total{tool=~"stripe|email"}[5m]))`,
		`claims_completed_total{status!="paid"} / ignoring(status) group_left sum(claims_completed_total) # comment`,
		`sum(idempotency_conflicts_total{job="worker"}) or vector(0)`,
	}
	for _, e := range good {
		_, problems := checkPromQL(e)
		assert.Empty(t, problems, e)
	}
	bad := map[string]string{
		`rate(claims_complete_total[5m])`:                                      "unknown metric",
		`rat(claims_completed_total[5m])`:                                      "unknown function",
		`claims_completed_total{status="dead_lettered"}`:                       "not one of",
		`claims_completed_total{stauts="paid"}`:                                "no label",
		`idempotency_replays_total{tool=~"stripe|mail"}`:                       "not one of",
		`up{job="prometheus"}`:                                                 "not one of",
		`sum by (tool) (claim_resumes_total)`:                                  "grouping label",
		`sum(rate(claims_completed_total[5m])`:                                 "unclosed",
		`claims_completed_total{status="paid"`:                                 "not closed",
		`claims_completed_total{status=paid}`:                                  "malformed",
		`{__name__="up"}`:                                                      "without a metric name",
		`histogram_quantile(0.95, rate(claim_history_bytes_bytes_bucket[5m]))`: "unknown metric",
		`rate(claims_completed_total[5m]))`:                                    "unbalanced",
		`claims_completed_total{status="paid}`:                                 "unterminated",
		`vector(1)`:                                                            "reads no metric",
		// Caught since the checks use Prometheus' parser.
		`rate(claims_completed_total)`:                                                "expected type range vector",
		`{"up"}`:                                                                      "without a metric name",
		`claims_completed_total{status="paid"}}`:                                      "unbalanced",
		`sort_by_label(claims_completed_total, "status")`:                             "not enabled",
		`histogram_fraction(0, 1, claim_step_duration_seconds_bucket)`:                "not in promFunctions",
		`rate(claims_completed_total[$range])`:                                        "Grafana variable outside a string",
		`sum by (tool) (claim_resumes_total) + on() sum(idempotency_conflicts_total)`: "grouping label",
		`claims_completed_total / on(stauts) group_left sum(claims_completed_total)`:  "grouping label",
		`claims_completed_total / on(status) group_left(tool) claims_completed_total`: "grouping label",
		`sum without (stauts) (rate(claims_completed_total[$__rate_interval]))`:       "grouping label",
	}
	for e, want := range bad {
		_, problems := checkPromQL(e)
		assert.Contains(t, strings.Join(problems, "; "), want, e)
	}
}
