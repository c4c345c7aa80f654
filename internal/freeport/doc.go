// Package freeport picks loopback ports for servers that are about to
// bind them: the dev mesh, in-process test clusters, tests that run
// `tern serve` as a process, and the bench module's comparison runner.
//
// It is a package of its own because all of them pick several ports for
// one node at once and had each written the same picker, one port at a
// time, which can hand out the same port twice; a node given one port
// for two of its listeners fails to start. One picker that holds what it
// has picked until it has them all is the fix, written once.
package freeport
