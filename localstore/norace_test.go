//go:build !race

package localstore

const raceEnabled = false
