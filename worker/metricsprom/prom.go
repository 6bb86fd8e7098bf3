// Package metricsprom gives the worker one Prometheus registry for the Temporal
// SDK's own metrics and durableclaims' metrics. Both are emitted through the
// SDK's metrics handler (go.temporal.io/sdk/contrib/opentelemetry, exported
// by OpenTelemetry's Prometheus exporter): activities use
// activity.GetMetricsHandler, workflows workflow.GetMetricsHandler, which
// stays silent during replay, so a replayed step is never counted twice.
package metricsprom

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// Prometheus is the worker's metrics: the SDK handler to give the client,
// and the HTTP handler that serves /metrics.
type Prometheus struct {
	Handler  client.MetricsHandler
	Registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
}

// New sets up the registry and the SDK metrics handler.
func New() (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	h := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("durableclaims"),
		UseMonotonicCounters: true,
	})
	return &Prometheus{Handler: newCached(h), Registry: reg, provider: provider}, nil
}

// HTTPHandler serves the registry in the Prometheus text format.
func (p *Prometheus) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(p.Registry, promhttp.HandlerOpts{Registry: p.Registry})
}

// Close flushes and stops the meter provider.
func (p *Prometheus) Close() error { return p.provider.Shutdown(context.Background()) }
