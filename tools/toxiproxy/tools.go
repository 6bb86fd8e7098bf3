// Module toxiproxy pins the network-fault proxy the fault soak and the
// partition tests run, toxiproxy v2.12.0, as a Go tool of its own module,
// so its dependencies never move the product's (`make toxiproxy` builds
// its server into bin/; the tests drive it with its Go client).
package toxiproxy
