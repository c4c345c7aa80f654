// Package logbuf is a buffer that a logger's goroutines may write to at
// once while a test reads what they wrote: tests that assert on what a
// node logged (the mesh's, the replicator's, the store's) each had their
// own copy of it, and a package of tests cannot share a type with another
// package's tests except through a package like this one.
package logbuf
