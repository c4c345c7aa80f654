// Command tern is the tern binary: `tern serve` runs a node; the other
// subcommands are clients of a running node's admin API.
//
// This package only parses flags and configuration and calls into the
// packages that do the work; it must not hold logic other packages need.
// Exit status: 0 success, 1 failure, 2 usage (bad flags or configuration).
package main
