//! TLS for `wattio serve` and `wattio transfer`: rustls with the *ring* provider (no OpenSSL).
//!
//! - Client: the system trust store by default (`rustls-native-certs`: the files Debian's
//!   `ca-certificates` maintains under /etc/ssl/certs, or `SSL_CERT_FILE` / `SSL_CERT_DIR` as
//!   OpenSSL reads them), `--cacert FILE` instead of it and `--insecure`, as curl has them. The
//!   server name goes out as SNI (not for IP addresses, which RFC 6066 §3 excludes); ALPN
//!   offers `http/1.1` only. Handshake failures become one-line messages naming the cause and
//!   the fix ([`handshake_error`]).
//! - Server: one certificate chain and key from PEM files ([`tls_server_config`]).
//! - [`Conn`]: a TCP connection, with or without TLS, for the engine and the server.
//!
//! The CPU TLS costs is spent on the process's own threads (rustls encrypts and decrypts in
//! the task that reads or writes), so it is in the process CPU time the tuners read.

use crate::error::HttpError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How the client checks servers' certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsOptions {
    /// Trust only the CA certificates in this PEM file, instead of the system store
    /// (`--cacert`).
    pub cacert: Option<PathBuf>,
    /// Do not verify the certificates of the servers named on the command line
    /// (`--insecure`): encryption without authentication. Servers reached otherwise (a
    /// redirect, a mirror found elsewhere, a checksum file's host) are still verified.
    pub insecure: bool,
    /// Do not verify any server's certificate (`--insecure-all`).
    pub insecure_all: bool,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client configuration for `opts`, verifying certificates unless `verify` is false
/// (trust roots read now; built once per transfer, so every connection shares its TLS session
/// cache and resumes sessions when it reconnects).
pub fn client_config(
    opts: &ClientTlsOptions,
    verify: bool,
) -> Result<Arc<rustls::ClientConfig>, HttpError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(HttpError::NoProtocolVersion)?;
    let mut cfg = if !verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_no_client_auth()
    } else {
        let pinned = match &opts.cacert {
            Some(p) => read_certs(p, "--cacert")?,
            None => Vec::new(),
        };
        let roots = Arc::new(trust_roots(opts.cacert.as_deref())?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(HttpError::Verifier)?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaFileVerifier { webpki, pinned }))
            .with_no_client_auth()
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The CA certificates in `cacert`, or the system's.
fn trust_roots(cacert: Option<&Path>) -> Result<RootCertStore, HttpError> {
    let mut roots = RootCertStore::empty();
    match cacert {
        Some(p) => {
            let certs = read_certs(p, "--cacert")?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(HttpError::NoUsableCa { path: p.into() });
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                return Err(HttpError::NoSystemRoots { why });
            }
        }
    }
    Ok(roots)
}

/// The standard verification (rustls-webpki), plus what curl accepts with `--cacert` and webpki
/// does not: a server that presents, as its own, a certificate the `--cacert` file holds
/// byte for byte but that is marked as a CA (`openssl req -x509` marks its self-signed
/// certificates so). Such a certificate is trusted when it names the host and is within its
/// validity dates.
#[derive(Debug)]
struct CaFileVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for CaFileVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(e)
                if ca_used_as_end_entity(&e)
                    && self
                        .pinned
                        .iter()
                        .any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                let parsed = ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
                check_validity(end_entity, now)?;
                Ok(ServerCertVerified::assertion())
            }
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether webpki refused a certificate for being a CA used as a server's own. rustls passes
/// webpki's `Error::CaUsedAsEndEntity` on as `CertificateError::Other`, whose text is the
/// variant's name (`tls_e2e` breaks if that changes).
fn ca_used_as_end_entity(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(CertificateError::Other(o))
        if o.to_string() == "CaUsedAsEndEntity")
}

/// The certificate's validity period (`notBefore`, `notAfter`, Unix seconds), read from its DER
/// (RFC 5280 §4.1: Certificate → tbsCertificate → [version] serialNumber signature issuer
/// validity); `None` when it is not that shape.
fn validity(der: &[u8]) -> Option<(u64, u64)> {
    let (_, cert, _) = der_tlv(der)?;
    let (_, tbs, _) = der_tlv(cert)?;
    let mut rest = tbs;
    let (tag, _, r) = der_tlv(rest)?;
    if tag == 0xa0 {
        rest = r; // explicit version
    }
    for _ in 0..3 {
        rest = der_tlv(rest)?.2; // serialNumber, signature, issuer
    }
    let (tag, val, _) = der_tlv(rest)?;
    if tag != 0x30 {
        return None;
    }
    let (t1, nb, r) = der_tlv(val)?;
    let (t2, na, _) = der_tlv(r)?;
    Some((der_time(t1, nb)?, der_time(t2, na)?))
}

/// One DER tag-length-value: (tag, value, the bytes after it).
fn der_tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&l0, mut b) = b.split_first()?;
    let len = if l0 < 0x80 {
        l0 as usize
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |a, &x| a << 8 | x as usize);
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

/// A UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime (`YYYYMMDDHHMMSSZ`, tag 0x18) as
/// Unix seconds (RFC 5280 §4.1.2.5).
fn der_time(tag: u8, v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?.strip_suffix('Z')?;
    let (y, rest) = match (tag, s.len()) {
        (0x17, 12) => {
            let yy: i64 = s[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &s[2..])
        }
        (0x18, 14) => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    let n = |i: usize| rest.get(i..i + 2)?.parse::<i64>().ok();
    let (m, d, hh, mm, ss) = (n(0)?, n(2)?, n(4)?, n(6)?, n(8)?);
    let days = crate::civil::days_from_civil(y, m, d);
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// Refuses a certificate outside its validity period, with the errors webpki gives.
fn check_validity(der: &[u8], now: UnixTime) -> Result<(), rustls::Error> {
    let (nb, na) = validity(der).ok_or(CertificateError::BadEncoding)?;
    let t = now.as_secs();
    let at = |s| UnixTime::since_unix_epoch(std::time::Duration::from_secs(s));
    if t > na {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after: at(na),
        }
        .into());
    }
    if t < nb {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before: at(nb),
        }
        .into());
    }
    Ok(())
}

/// Every certificate of a PEM file.
fn read_certs(p: &Path, flag: &'static str) -> Result<Vec<CertificateDer<'static>>, HttpError> {
    let bytes = std::fs::read(p).map_err(|source| HttpError::ReadFile {
        flag,
        path: p.into(),
        source,
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| HttpError::NotPem {
            flag,
            path: p.into(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(HttpError::NoCertificate {
            flag,
            path: p.into(),
        });
    }
    Ok(certs)
}

/// The server configuration for a PEM certificate chain (leaf first) and its PEM private key
/// (PKCS#8, PKCS#1 or SEC1).
pub fn tls_server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, HttpError> {
    let chain = read_certs(cert, "--tls-cert")?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| HttpError::NoKey {
        path: key.into(),
        reason: e.to_string(),
    })?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(HttpError::NoProtocolVersion)?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|error| HttpError::KeyMismatch {
            cert: cert.into(),
            key: key.into(),
            error,
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The name the client checks the certificate against and sends as SNI.
pub fn server_name(host: &str) -> Result<ServerName<'static>, HttpError> {
    ServerName::try_from(host.to_string()).map_err(|_| HttpError::ServerName {
        host: host.to_string(),
    })
}

/// A one-line message for a failed TLS handshake with `host`: what is wrong with the
/// certificate and what to do about it; `skip` is the flag that would skip verification for
/// this host (`--insecure` for a server named on the command line, `--insecure-all` for
/// others).
pub fn handshake_error(host: &str, e: &io::Error, skip: &str) -> HttpError {
    HttpError::Handshake {
        host: host.to_string(),
        message: handshake_problem(host, e, skip),
    }
}

fn handshake_problem(host: &str, e: &io::Error, skip: &str) -> String {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return format!("TLS handshake with {host} failed: {e}; is it an HTTPS server?");
    };
    let fix = format!("or {skip} to skip verification");
    match tls {
        rustls::Error::InvalidCertificate(c) => certificate_error(host, c, &fix),
        rustls::Error::NoApplicationProtocol => format!(
            "{host}: the server does not speak HTTP/1.1 over TLS (ALPN)"
        ),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "TLS handshake with {host} failed: the server did not answer in TLS; is it an HTTPS server (or is the URL http://)?"
        ),
        rustls::Error::AlertReceived(alert) => format!(
            "TLS handshake with {host} failed: the server refused it (TLS alert: {}); check the host name (it is sent as SNI) and the server's TLS settings",
            words(&format!("{alert:?}"))
        ),
        other => format!("TLS handshake with {host} failed: {other}"),
    }
}

/// The message for a certificate the client refused: what is wrong with it and what to do
/// about it (`fix` names the flag that would skip verification).
fn certificate_error(host: &str, c: &CertificateError, fix: &str) -> String {
    match c {
        CertificateError::Other(o) if o.to_string() == "CaUsedAsEndEntity" => format!(
            "{host}: the server's certificate is a CA certificate used as the server's own (self-signed with openssl req -x509?); give that very certificate with --cacert FILE ({fix})"
        ),
        CertificateError::UnknownIssuer => format!(
            "{host}: the server's certificate is signed by an unknown certificate authority; give that CA with --cacert FILE ({fix})"
        ),
        CertificateError::NotValidForName => format!(
            "{host}: the server's certificate is not valid for the name {host}; use a name the certificate was issued for ({fix})"
        ),
        CertificateError::NotValidForNameContext { presented, .. } => {
            let names: Vec<String> = presented.iter().filter_map(|n| san_text(n)).collect();
            if names.is_empty() {
                format!(
                    "{host}: the server's certificate names no host; the server needs a certificate for {host} ({fix})"
                )
            } else {
                format!(
                    "{host}: the server's certificate is not valid for the name {host} but for {}; use one of those names ({fix})",
                    names.join(", ")
                )
            }
        }
        CertificateError::Expired => format!(
            "{host}: the server's certificate has expired; the server must renew it ({fix})"
        ),
        CertificateError::ExpiredContext { not_after, .. } => format!(
            "{host}: the server's certificate expired on {}; the server must renew it ({fix})",
            utc_date(*not_after)
        ),
        CertificateError::NotValidYet => format!(
            "{host}: the server's certificate is not valid yet; check this machine's clock ({fix})"
        ),
        CertificateError::NotValidYetContext { not_before, .. } => format!(
            "{host}: the server's certificate is not valid before {}; check this machine's clock ({fix})",
            utc_date(*not_before)
        ),
        other => format!(
            "{host}: the server's certificate was refused ({}) ({fix})",
            certificate_problem(other)
        ),
    }
}

/// A DNS name or IP address of a certificate as rustls-webpki reports it in
/// `NotValidForNameContext` (`DnsName("a.example")`, `IpAddress(127.0.0.1)`), without the
/// wrapping; other kinds of names are left out.
fn san_text(presented: &str) -> Option<String> {
    if let Some(n) = presented
        .strip_prefix("DnsName(\"")
        .and_then(|r| r.strip_suffix("\")"))
    {
        return Some(n.to_string());
    }
    presented
        .strip_prefix("IpAddress(")
        .and_then(|r| r.strip_suffix(')'))
        .map(str::to_string)
}

/// What is wrong with a certificate, in words: rustls-webpki's and rustls's variant names
/// (`CaUsedAsEndEntity`, `BadSignature`) without their payloads.
fn certificate_problem(c: &CertificateError) -> String {
    let name = match c {
        CertificateError::Other(o) => o.to_string(),
        other => format!("{other:?}"),
    };
    words(name.split(['(', ' ', '{']).next().unwrap_or(""))
}

/// `UnrecognisedName` → `unrecognised name` (rustls names TLS alerts by their RFC 8446 §6
/// names in CamelCase).
fn words(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() && !out.is_empty() {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a Unix time.
fn utc_date(t: UnixTime) -> String {
    let s = t.as_secs();
    let (days, rem) = ((s / 86_400) as i64, s % 86_400);
    let (y, m, d) = crate::civil::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `--insecure`: any certificate is accepted; the handshake signatures are still checked, so
/// the peer holds the key of the certificate it sent (what curl's `--insecure` leaves, too).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connection with or without TLS.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Conn {
    /// Writes `bytes` and flushes them. Over TLS, `write_all` alone can leave the last record
    /// in rustls's buffer (tokio-rustls's `poll_write` reports bytes as written once rustls holds
    /// them, even when the socket would block), and a request left there is never answered.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.write_all(bytes).await?;
        self.flush().await
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls_err(e: rustls::Error) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }

    #[test]
    fn dates_from_unix_time() {
        let d = |s| {
            utc_date(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                s,
            )))
        };
        assert_eq!(d(0), "1970-01-01 00:00:00 UTC");
        // `date -u -d @951782400` (a leap day)
        assert_eq!(d(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(d(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(d(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }

    #[test]
    fn handshake_errors_name_the_cause_and_the_fix() {
        let msg = |e: rustls::Error| {
            handshake_error("example.org", &tls_err(e), "--insecure").to_string()
        };
        let m = msg(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ));
        assert!(
            m.contains("unknown certificate authority") && m.contains("--cacert"),
            "{m}"
        );
        let m = msg(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("example.org").unwrap(),
                presented: vec![
                    "DnsName(\"a.test\")".into(),
                    "IpAddress(10.0.0.1)".into(),
                    "DirectoryName".into(),
                ],
            },
        ));
        assert!(
            m.contains("not valid for the name example.org but for a.test, 10.0.0.1;"),
            "{m}"
        );
        let m = msg(rustls::Error::InvalidCertificate(
            CertificateError::ExpiredContext {
                time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_700_000_000)),
                not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(951_782_400)),
            },
        ));
        assert!(m.contains("expired on 2000-02-29"), "{m}");
        let m = msg(rustls::Error::AlertReceived(
            rustls::AlertDescription::UnrecognisedName,
        ));
        assert!(m.contains("(TLS alert: unrecognised name)"), "{m}");
        let m = msg(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType,
        ));
        assert!(m.contains("did not answer in TLS"), "{m}");
        for m in [
            msg(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
            handshake_error("h", &io::Error::other("reset"), "--insecure").to_string(),
        ] {
            assert_eq!(m.lines().count(), 1, "{m}");
            assert!(!m.contains("Some("), "{m}");
        }
    }

    #[test]
    fn validity_dates_from_der() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["h".to_string()]).unwrap();
        p.not_before = rcgen::date_time_ymd(2000, 2, 29);
        p.not_after = rcgen::date_time_ymd(2099, 12, 31);
        let c = p.self_signed(&key).unwrap();
        // rcgen writes UTCTime before 2050 and GeneralizedTime after (RFC 5280 §4.1.2.5);
        // `date -u -d 2000-02-29 +%s` = 951782400, `date -u -d 2099-12-31 +%s` = 4102358400
        assert_eq!(validity(c.der()), Some((951_782_400, 4_102_358_400)));
        assert_eq!(validity(b"\x30\x03\x02\x01"), None, "truncated");
        let at = |s| UnixTime::since_unix_epoch(std::time::Duration::from_secs(s));
        assert!(check_validity(c.der(), at(1_700_000_000)).is_ok());
        let e = check_validity(c.der(), at(4_200_000_000)).unwrap_err();
        assert!(handshake_error("h", &tls_err(e), "--insecure")
            .to_string()
            .contains("expired on 2099-12-31"),);
        assert!(
            check_validity(c.der(), at(900_000_000)).is_err(),
            "before notBefore"
        );
    }

    #[test]
    fn certificate_problems_in_words() {
        assert_eq!(
            certificate_problem(&CertificateError::BadSignature),
            "bad signature"
        );
        assert_eq!(certificate_problem(&CertificateError::Revoked), "revoked");
    }

    #[test]
    fn bad_files_are_refused_with_the_flag_named() {
        let d = tempfile::tempdir().unwrap();
        let empty = d.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(
            &ClientTlsOptions {
                cacert: Some(empty.clone()),
                ..ClientTlsOptions::default()
            },
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--cacert ") && e.contains("no certificate"),
            "{e}"
        );
        let e = client_config(
            &ClientTlsOptions {
                cacert: Some(d.path().join("missing.pem")),
                ..ClientTlsOptions::default()
            },
            true,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("cannot read it"), "{e:#}");
        let e = tls_server_config(&empty, &empty).unwrap_err().to_string();
        assert!(e.starts_with("--tls-cert "), "{e}");
        assert!(client_config(&ClientTlsOptions::default(), false).is_ok());
    }
}
