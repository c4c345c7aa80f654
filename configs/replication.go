package configs

import (
	"fmt"
	"time"
)

// Replication tunes cross-region replication. Which topics replicate where
// is not configuration: it is policy, set through the admin API and kept
// in the mesh. The links themselves use the mesh section (address, TLS).
type Replication struct {
	// StallAfter reports a stream stalled when it has a backlog and the
	// destination acknowledged nothing for this long. Default 30s.
	StallAfter Duration `yaml:"stall_after"`
	// ReadBytes is how much of a partition log a sender reads at a time.
	// Default 1MiB.
	ReadBytes Bytes `yaml:"read_bytes"`
	// StreamCredit is how many bytes a sender may have in flight per
	// partition before the destination acknowledges; it bounds catch-up
	// memory per stream. Default 8MiB.
	StreamCredit Bytes `yaml:"stream_credit"`
	// RescanInterval is how often new and deleted topics are noticed.
	// Default 1s.
	RescanInterval Duration `yaml:"rescan_interval"`
	// RetryMax caps the delay between retries of a failed stream or link.
	// Default 30s.
	RetryMax Duration `yaml:"retry_max"`
}

// defaultReplication is the built-in replication section.
func defaultReplication() Replication {
	return Replication{
		StallAfter:     Duration(30 * time.Second),
		ReadBytes:      1 << 20,
		StreamCredit:   8 << 20,
		RescanInterval: Duration(time.Second),
		RetryMax:       Duration(30 * time.Second),
	}
}

// validate reports the replication section's problems, one per field.
func (r Replication) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("replication.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if r.StallAfter <= 0 {
		bad("stall_after", "%v: want a positive duration like 30s", time.Duration(r.StallAfter))
	}
	if r.ReadBytes < 4<<10 || r.ReadBytes > 64<<20 {
		bad("read_bytes", "%v: want 4KiB to 64MiB", r.ReadBytes)
	}
	if r.StreamCredit < 64<<10 || r.StreamCredit > 1<<30 {
		bad("stream_credit", "%v: want 64KiB to 1GiB (it must also hold the largest message)", r.StreamCredit)
	}
	if r.RescanInterval <= 0 {
		bad("rescan_interval", "%v: want a positive duration like 1s", time.Duration(r.RescanInterval))
	}
	if r.RetryMax <= 0 {
		bad("retry_max", "%v: want a positive duration like 30s", time.Duration(r.RetryMax))
	}
	return errs
}

// validateMeshSecret checks what the replication links need of the mesh
// section: a dev-mode secret long enough to derive certificates from.
func validateMeshSecret(m Mesh) []error {
	if m.Secret != "" && len(m.Secret) < 16 {
		return []error{fmt.Errorf("mesh.secret: is %d bytes; use at least 16 random bytes (every node of the mesh needs the same one)", len(m.Secret))}
	}
	if m.Secret != "" && m.TLS.Cert != "" {
		return []error{fmt.Errorf("mesh.secret: set either mesh.secret (dev mode) or mesh.tls files, not both")}
	}
	return nil
}
