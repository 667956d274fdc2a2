//! Certificates made by the tests (rcgen): a private CA and server certificates it signs, as PEM
//! files in a temporary directory. Shared by the transfer crate's TLS tests and the CLI's
//! (`#[path]`-included there).
#![allow(dead_code)]

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A test CA and the PEM files of what it signed.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A server certificate and its key, as PEM files.
pub struct ServerCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Validity of a server certificate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// 2000 to 4000.
    Current,
    /// 2000-01-01 to 2001-01-01.
    Expired,
}

impl TestPki {
    /// A new CA ("wattio test CA"); its certificate is `ca_pem()`.
    pub fn new() -> TestPki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "wattio test CA");
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.not_before = date_time_ymd(2000, 1, 1);
        p.not_after = date_time_ymd(4000, 1, 1);
        let ca = p.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        TestPki { dir, ca, ca_key }
    }

    /// The CA certificate (for `--cacert`).
    pub fn ca_pem(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for `names` (DNS names or IP addresses) signed by the CA, written
    /// as `<file>.pem` and `<file>.key`.
    pub fn server(&self, file: &str, names: &[&str], validity: Validity) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        p.not_before = date_time_ymd(2000, 1, 1);
        p.not_after = match validity {
            Validity::Current => date_time_ymd(4000, 1, 1),
            Validity::Expired => date_time_ymd(2001, 1, 1),
        };
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        self.write(file, &cert, &key)
    }

    /// A self-signed server certificate marked as a CA, as `openssl req -x509` makes them (not
    /// signed by the test CA), written as `<file>.pem` and `<file>.key`.
    pub fn self_signed(&self, file: &str, names: &[&str]) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, names[0]);
        let cert = p.self_signed(&key).unwrap();
        self.write(file, &cert, &key)
    }

    /// Writes `cert` and `key` as `<file>.pem` and `<file>.key` in the PKI's directory.
    fn write(&self, file: &str, cert: &rcgen::Certificate, key: &KeyPair) -> ServerCert {
        let out = ServerCert {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&out.cert, cert.pem()).unwrap();
        std::fs::write(&out.key, key.serialize_pem()).unwrap();
        out
    }

    /// The directory the PEM files are in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
