package cli

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/strata-stream/strata/internal/certs"
)

// TLSFlags are the client commands' TLS settings.
type TLSFlags struct {
	On       bool   // --tls: TLS with the system roots
	CAFile   string // --tls-ca-file: CAs that signed the brokers' certificates
	CertFile string // --tls-cert-file and --tls-key-file: a client certificate (mTLS)
	KeyFile  string
}

// Config returns the TLS configuration the flags ask for, or nil for plaintext.
// Any of the file flags implies --tls.
func (f TLSFlags) Config() (*tls.Config, error) {
	if !f.On && f.CAFile == "" && f.CertFile == "" && f.KeyFile == "" {
		return nil, nil
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, Usagef("--tls-cert-file and --tls-key-file must be given together")
	}
	if f.CertFile != "" {
		r, err := certs.New(certs.Files{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CAFile}, 0, nil)
		if err != nil {
			return nil, Usage(err)
		}
		return r.ClientConfig(), nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, Usage(err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, Usagef("--tls-ca-file %s holds no PEM certificate", f.CAFile)
		}
	}
	return c, nil
}
