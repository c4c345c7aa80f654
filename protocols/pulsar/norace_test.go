//go:build !race

package pulsar

const raceEnabled = false
