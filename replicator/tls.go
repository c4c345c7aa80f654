package replicator

// Mesh TLS. Every mesh connection is mutual TLS 1.3 with ALPN tern-repl/1: each side presents a
// certificate that must chain to the mesh CA. Node names are not checked against certificate
// names; the CA is the trust boundary, and the HELLO exchange carries the node's name.
//
// Dev mode derives the CA from a shared secret so a mesh can be started with one setting: the
// secret goes through HKDF-SHA256 to an ed25519 seed, and the CA certificate is built from fixed
// fields (serial, validity, subject), so every node computes byte-identical CA certificates
// without talking to each other. Each node then issues itself a fresh leaf certificate, signed by
// that CA, at start. Anyone who knows the secret can mint certificates: it is a dev mode.

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

// ALPN is the application protocol negotiated on mesh connections; a peer speaking anything else
// fails the TLS handshake.
const ALPN = "tern-repl/1"

const (
	devCASalt   = "tern mesh dev CA"
	devCAInfo   = "ed25519 CA key v1"
	resetKeyTag = "tern mesh stateless reset v1"
)

// meshTLS holds the certificates and derived keys for one node.
type meshTLS struct {
	cert  tls.Certificate
	roots *x509.CertPool
	// resetSeed is stable per node across restarts (derived from the secret or the key file),
	// so a restarted node's stateless resets are recognised by peers.
	resetSeed []byte
}

func loadMeshTLS(cfg Config) (*meshTLS, error) {
	if cfg.TLS.MeshSecret != "" {
		return devMeshTLS(cfg.TLS.MeshSecret, cfg.NodeName, cfg.Region, cfg.TLS.DevCertValidity)
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("replicator: load TLS.CertFile %q / TLS.KeyFile %q: %w", cfg.TLS.CertFile, cfg.TLS.KeyFile, err)
	}
	caPEM, err := os.ReadFile(cfg.TLS.CAFile)
	if err != nil {
		return nil, fmt.Errorf("replicator: read TLS.CAFile: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("replicator: TLS.CAFile %q holds no PEM certificate", cfg.TLS.CAFile)
	}
	keyPEM, err := os.ReadFile(cfg.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("replicator: read TLS.KeyFile: %w", err)
	}
	return &meshTLS{cert: cert, roots: roots, resetSeed: keyPEM}, nil
}

// DevCA derives the dev-mode mesh CA from a secret: its certificate (DER) and key. The result is
// deterministic, which is what lets every node of a dev mesh agree on the CA without exchanging
// anything; exported so tools and tests can issue certificates for the same mesh.
func DevCA(secret string) (certDER []byte, key ed25519.PrivateKey, err error) {
	if len(secret) < minSecretLength {
		return nil, nil, fmt.Errorf("replicator: mesh secret is %d bytes: use at least %d", len(secret), minSecretLength)
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), []byte(devCASalt), devCAInfo, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("replicator: derive dev CA key: %w", err)
	}
	key = ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tern mesh dev CA", Organization: []string{"tern"}},
		NotBefore:             time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2124, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	// ed25519 signatures are deterministic and the template is fixed, so the DER is too.
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("replicator: build dev CA certificate: %w", err)
	}
	return certDER, key, nil
}

// IssueLeaf issues a certificate for a mesh node, signed by the given CA, usable for both TLS
// client and server authentication (a node dials and accepts with the same identity).
func IssueLeaf(caDER []byte, caKey crypto.Signer, node, region string, validity time.Duration) (tls.Certificate, error) {
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("replicator: parse CA certificate: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("replicator: generate node key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("replicator: generate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: node, OrganizationalUnit: []string{region}, Organization: []string{"tern"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("replicator: sign node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("replicator: parse node certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: priv, Leaf: leaf}, nil
}

func devMeshTLS(secret, node, region string, validity time.Duration) (*meshTLS, error) {
	caDER, caKey, err := DevCA(secret)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("replicator: parse dev CA: %w", err)
	}
	cert, err := IssueLeaf(caDER, caKey, node, region, validity)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &meshTLS{cert: cert, roots: roots, resetSeed: []byte(secret)}, nil
}

// serverConfig requires and verifies a client certificate chaining to the mesh CA.
func (m *meshTLS) serverConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.roots,
		NextProtos:   []string{ALPN},
		MinVersion:   tls.VersionTLS13,
	}
}

// clientConfig verifies the server's chain against the mesh CA but not a host name: peers are
// addressed by IP from the membership layer and identified by the CA, not by DNS.
func (m *meshTLS) clientConfig() *tls.Config {
	roots := m.roots
	return &tls.Config{
		Certificates:       []tls.Certificate{m.cert},
		NextProtos:         []string{ALPN},
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by VerifyConnection below, which checks the chain
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth)
		},
	}
}

func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("replicator: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("replicator: peer certificate %q does not chain to the mesh CA: %w", certs[0].Subject.CommonName, err)
	}
	return nil
}

// statelessResetKey derives the QUIC stateless reset key from per-node stable material.
func (m *meshTLS) statelessResetKey(node string) ([32]byte, error) {
	var k [32]byte
	b, err := hkdf.Key(sha256.New, m.resetSeed, []byte(resetKeyTag), node, len(k))
	if err != nil {
		return k, fmt.Errorf("replicator: derive stateless reset key: %w", err)
	}
	copy(k[:], b)
	return k, nil
}
