package main

// The cluster's credentials: one CA signs the API server's serving certificate and every
// client certificate; a separate key signs ServiceAccount tokens. Files are kept across
// restarts of `up` on the same directory, so a kubeconfig written once stays valid.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

func readPEM(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(raw)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return b.Bytes, nil
}

func newKey(path string) (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return k, writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// loadOrCreatePKI makes the CA on first use and reads it back afterwards.
func loadOrCreatePKI(dir string) (*pki, error) {
	p := &pki{dir: dir}
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if der, err := readPEM(certPath); err == nil {
		kder, err := readPEM(keyPath)
		if err != nil {
			return nil, err
		}
		if p.caCert, err = x509.ParseCertificate(der); err != nil {
			return nil, err
		}
		k, err := x509.ParseECPrivateKey(kder)
		if err != nil {
			return nil, err
		}
		p.caKey = k
		return p, nil
	}
	k, err := newKey(keyPath)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "testcluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caKey = k
	return p, nil
}

// issue writes NAME.crt and NAME.key unless they exist: a serving certificate when hosts is
// set, else a client certificate for user cn in the given groups.
func (p *pki) issue(name, cn string, groups []string, hosts []string) error {
	certPath, keyPath := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if _, err := os.Stat(certPath); err == nil {
		return nil
	}
	k, err := newKey(keyPath)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(5 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &k.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// issueTo writes a serving certificate for hosts as DIR/tls.crt and DIR/tls.key (the names
// controller-runtime's webhook server reads), issued once as NAME.crt and NAME.key.
func (p *pki) issueTo(dir, name string, hosts []string) error {
	if err := p.issue(name, name, nil, hosts); err != nil {
		return err
	}
	for _, f := range [][2]string{{name + ".crt", "tls.crt"}, {name + ".key", "tls.key"}} {
		raw, err := os.ReadFile(filepath.Join(p.dir, f[0]))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f[1]), raw, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountKey writes the token signing key pair (sa.key, sa.pub) once.
func (p *pki) serviceAccountKey() error {
	keyPath := filepath.Join(p.dir, "sa.key")
	if _, err := os.Stat(keyPath); err == nil {
		return nil
	}
	k, err := newKey(keyPath)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(p.dir, "sa.pub"), "PUBLIC KEY", der, 0o644)
}

// kubeconfig writes a kubeconfig for the client certificate NAME, with everything inline so
// the file can be copied elsewhere.
func (p *pki) kubeconfig(path, server, name string) error {
	read := func(f string) (string, error) {
		b, err := os.ReadFile(filepath.Join(p.dir, f))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read(name + ".crt")
	if err != nil {
		return err
	}
	key, err := read(name + ".key")
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: testcluster
  context:
    cluster: testcluster
    user: %s
current-context: testcluster
`, server, ca, name, crt, key, name)
	return os.WriteFile(path, []byte(cfg), 0o600)
}
