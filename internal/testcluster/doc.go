// Package testcluster starts in-process tern nodes for end-to-end tests:
// each on free loopback ports with its own temporary data directory, with
// restarts that keep a node's identity, data and addresses.
//
// It is test support only: nothing in the product imports it. It grows
// with the features tests need (regions, link faults) and must stay a thin
// layer over proxy.Node, never a second implementation of a node.
package testcluster
