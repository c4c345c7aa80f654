// Package perftest holds what the drivers' tests share: each driver runs
// the same short workloads against a real node, and the figures must add
// up the same way whichever protocol carried them. It is its own package
// so that the checks are written once and no driver's test lags behind.
package perftest
