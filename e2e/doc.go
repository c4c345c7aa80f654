// Package e2e holds tests that start whole tern nodes (in process through
// internal/testcluster, or the built binary) and drive them with real
// clients over real sockets. It has no product code.
package e2e
