package regions

import "errors"

// Sentinel errors. Callers test them with errors.Is; the wrapped message
// carries the detail (which field, which node, which address).
var (
	// ErrInvalidConfig wraps every problem Validate finds.
	ErrInvalidConfig = errors.New("regions: invalid config")

	// ErrTagsTooLarge means the node tags do not fit serf's 512-byte
	// metadata budget; the message names the tags to shorten.
	ErrTagsTooLarge = errors.New("regions: node tags too large")

	// ErrInvalidKey means a gossip encryption key is not base64 of 16, 24
	// or 32 bytes.
	ErrInvalidKey = errors.New("regions: invalid gossip key")

	// ErrInvalidKeyring means the keyring file cannot be used.
	ErrInvalidKeyring = errors.New("regions: invalid keyring file")

	// ErrEncryptionDisabled is returned by keyring operations on a mesh
	// started without a gossip key.
	ErrEncryptionDisabled = errors.New("regions: gossip encryption is not enabled")

	// ErrJoin means no seed could be joined. The wrapped error says what
	// each seed answered.
	ErrJoin = errors.New("regions: join failed")

	// ErrNameInUse means another node with a different identity already
	// uses this node's name in the mesh.
	ErrNameInUse = errors.New("regions: node name already in use")

	// ErrForeignNode means a peer does not carry tern's tags, i.e. the seed
	// belongs to some other gossip pool.
	ErrForeignNode = errors.New("regions: peer is not a tern mesh node")

	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("regions: mesh closed")

	// ErrKeyring wraps failures reported by nodes during a keyring
	// operation.
	ErrKeyring = errors.New("regions: keyring operation failed")
)
