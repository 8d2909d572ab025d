package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/gafferhq/gaffer"
)

// etcdFlags are how a node reaches a secured etcd: TLS (server
// verification and a client certificate) and etcd's own authentication.
type etcdFlags struct {
	etcdCA       *string
	etcdCert     *string
	etcdKey      *string
	etcdUsername *string
	etcdPassword *string
}

func addEtcdFlags(fs *flagSet) *etcdFlags {
	return &etcdFlags{
		etcdCA:       fs.String("etcd-ca", "", "", "CA certificate (PEM) that signed etcd's server certificates; needs https:// endpoints"),
		etcdCert:     fs.String("etcd-cert", "", "", "client certificate (PEM) to present to etcd; needs --etcd-key"),
		etcdKey:      fs.String("etcd-key", "", "", "the client certificate's private key (PEM)"),
		etcdUsername: fs.String("etcd-username", "", "", "etcd user to authenticate as; the password comes from $GAFFER_ETCD_PASSWORD"),
		etcdPassword: fs.Secret("etcd-password", "the etcd user's password"),
	}
}

// secured reports whether any etcd TLS or auth setting was given.
func (f *etcdFlags) secured() bool {
	return *f.etcdCA != "" || *f.etcdCert != "" || *f.etcdKey != "" || *f.etcdUsername != "" || *f.etcdPassword != ""
}

// etcdAccess checks the etcd TLS and auth flags against cfg's endpoints
// and sets cfg's EtcdTLS, EtcdUsername and EtcdPassword. Errors name the
// flag at fault.
func (f *etcdFlags) etcdAccess(cfg *gaffer.Config) error {
	if (*f.etcdCert == "") != (*f.etcdKey == "") {
		return usageError("--etcd-cert and --etcd-key go together")
	}
	if (*f.etcdUsername == "") != (*f.etcdPassword == "") {
		return usageError("--etcd-username and $GAFFER_ETCD_PASSWORD go together")
	}
	if f.secured() && len(cfg.EtcdEndpoints) == 0 {
		return usageError("--etcd-ca, --etcd-cert, --etcd-key and --etcd-username are for the etcd named by --etcd, which is not set")
	}
	if *f.etcdCA != "" || *f.etcdCert != "" {
		for _, e := range cfg.EtcdEndpoints {
			if strings.HasPrefix(e, "http://") {
				// The etcd client would silently talk plain text to it.
				return usageError(fmt.Sprintf("--etcd-ca and --etcd-cert need https:// endpoints; --etcd has %s", e))
			}
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if *f.etcdCA != "" {
			pem, err := os.ReadFile(*f.etcdCA)
			if err != nil {
				return usageError(fmt.Sprintf("--etcd-ca: %v", err))
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return usageError(fmt.Sprintf("--etcd-ca: %s holds no PEM certificate", *f.etcdCA))
			}
		}
		if *f.etcdCert != "" {
			pair, err := tls.LoadX509KeyPair(*f.etcdCert, *f.etcdKey)
			if err != nil {
				return usageError(fmt.Sprintf("--etcd-cert/--etcd-key: %v", err))
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		cfg.EtcdTLS = tc
	}
	cfg.EtcdUsername, cfg.EtcdPassword = *f.etcdUsername, *f.etcdPassword
	return nil
}
