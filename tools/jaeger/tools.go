// Module jaeger pins the trace viewer the local stack runs, Jaeger
// all-in-one v1.75.0, as a Go tool of its own module, so its dependencies
// never move the product's (`make jaeger` builds it into bin/).
package jaeger
