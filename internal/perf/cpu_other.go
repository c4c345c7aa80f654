//go:build !unix

package perf

// selfCPU is 0 where getrusage is missing (Windows): the report's client
// CPU then reads 0.
func selfCPU() float64 { return 0 }
