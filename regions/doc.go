// Package regions owns mesh membership: which nodes exist, in which
// region, in which state, at which addresses, and how far apart the regions
// are. TODO: essay.
package regions
