//go:build race

package pulsar

// raceEnabled: under the race detector protobuf-go gives each Opaque
// message a shadow presence map, allocated anew after every reset, so
// allocation counts mean nothing there.
const raceEnabled = true
