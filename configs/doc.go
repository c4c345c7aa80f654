// Package configs is the YAML schema of a tern node: what an operator
// writes in a config file, its defaults (single.yaml, embedded, is the
// default node) and its validation, which reports every problem at once and
// names each field with what it accepts.
//
// configs composes settings; it holds no behaviour and must not start
// anything. The packages that do the work keep their own Config structs;
// the node (package proxy) maps this schema onto them.
package configs
