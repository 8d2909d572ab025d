package etcdserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Certs are the PEM files of a member serving clients over TLS: its own
// CA, the server certificate (for 127.0.0.1), and a client certificate
// the member accepts. Other files, signed by another CA, let tests show a
// stranger's certificate is refused.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// StrangerCert and StrangerKey are a client certificate from another
	// CA.
	StrangerCert, StrangerKey string
}

// Certs returns the member's TLS files, or nil without Options.ClientTLS.
func (s *Server) Certs() *Certs { return s.certs }

// writeCerts makes a test CA, a server and a client certificate under dir.
func writeCerts(dir string) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Certs{}
	ca, caKey, err := newCA("gaffer test etcd CA")
	if err != nil {
		return nil, err
	}
	if c.CA, err = writePEM(dir, "ca.pem", "CERTIFICATE", ca.Raw); err != nil {
		return nil, err
	}
	// The server certificate also authenticates the member to itself (its
	// gateway dials it as a client).
	if c.ServerCert, c.ServerKey, err = issue(dir, "server", ca, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = issue(dir, "client", ca, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	other, otherKey, err := newCA("stranger CA")
	if err != nil {
		return nil, err
	}
	if c.StrangerCert, c.StrangerKey, err = issue(dir, "stranger", other, otherKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	return c, nil
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// issue signs a certificate for 127.0.0.1 and writes it and its key as
// <name>.pem and <name>-key.pem.
func issue(dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage []x509.ExtKeyUsage) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, err := writePEM(dir, name+".pem", "CERTIFICATE", der)
	if err != nil {
		return "", "", err
	}
	keyFile, err := writePEM(dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	return certFile, keyFile, err
}

func writePEM(dir, name, typ string, der []byte) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// enableAuth creates root and the configured users, then turns etcd's
// authentication on, through the member's own server API.
func (s *Server) enableAuth() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	srv := s.etcd.Server
	s.mu.Unlock()
	if _, err := srv.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: s.opts.RootPassword}); err != nil {
		return fmt.Errorf("etcd auth: add root: %w", err)
	}
	if _, err := srv.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}); err != nil {
		return fmt.Errorf("etcd auth: grant root: %w", err)
	}
	for _, u := range s.opts.Users {
		end := []byte(u.Prefix)
		end[len(end)-1]++ // the prefix's range end, as clientv3.GetPrefixRangeEnd
		steps := []func() error{
			func() error {
				_, err := srv.UserAdd(ctx, &pb.AuthUserAddRequest{Name: u.Name, Password: u.Password})
				return err
			},
			func() error { _, err := srv.RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: u.Name}); return err },
			func() error {
				_, err := srv.RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: u.Name,
					Perm: &authpb.Permission{PermType: authpb.READWRITE, Key: []byte(u.Prefix), RangeEnd: end}})
				return err
			},
			func() error {
				_, err := srv.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: u.Name, Role: u.Name})
				return err
			},
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("etcd auth: user %s: %w", u.Name, err)
			}
		}
	}
	if _, err := srv.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		return fmt.Errorf("etcd auth: enable: %w", err)
	}
	return nil
}
