//! HTTPS end to end over loopback, with certificates the tests make: `wattio serve` over TLS,
//! nginx over TLS (with SNI choosing the server block), and the one-line errors for an unknown
//! CA, a name mismatch and an expired certificate.

#[path = "../../http/tests/common/mod.rs"]
mod common;

use common::certs::{TestPki, Validity};
use std::path::Path;
use std::time::Duration;
use wattio_http::{tls_server_config, ServerConfig, ServerHandle};
use wattio_transfer::{
    run_transfer, ClientTlsOptions, CoreBackend, Sla, TransferError, TransferOptions,
    TransferSummary,
};

/// A transfer no signal cancels.
fn transfer(o: &TransferOptions) -> Result<TransferSummary, TransferError> {
    run_transfer(o, &wattio_progress::Cancel::new().unwrap())
}

fn opts(src: String, dest: &Path, cacert: Option<&Path>) -> TransferOptions {
    let mut o = TransferOptions::new(src, dest, Sla::MaxThroughput);
    o.tuning.interval = Duration::from_millis(100);
    o.tuning.core_backend = CoreBackend::None;
    o.tuning.cpufreq = false;
    o.tuning.meter = false;
    o.data.retries = 2;
    o.data.tls = ClientTlsOptions {
        cacert: cacert.map(Path::to_path_buf),
        ..ClientTlsOptions::default()
    };
    o
}

fn tls_server(root: &Path, cert: &common::certs::ServerCert) -> ServerHandle {
    let mut cfg = ServerConfig::new(root);
    cfg.tls = Some(tls_server_config(&cert.cert, &cert.key).unwrap());
    ServerHandle::start(cfg, "127.0.0.1:0").unwrap()
}

/// The error of a transfer that must fail, as the CLI prints it (`{:#}`), on one line.
fn failure(o: &TransferOptions) -> String {
    let e = format!("{:#}", transfer(o).expect_err("the transfer must fail"));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        !e.contains("Some(") && !e.contains("Custom {") && !e.contains("DnsName("),
        "{e}"
    );
    e
}

#[test]
fn wattio_serve_over_tls_byte_identical_with_checksums() {
    let pki = TestPki::new();
    let cert = pki.server("localhost", &["localhost", "127.0.0.1"], Validity::Current);
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    let h = tls_server(src.path(), &cert);
    // by name (SNI sent) and by IP address (no SNI; the certificate names the address)
    for host in ["localhost", "127.0.0.1"] {
        let dst = tempfile::tempdir().unwrap();
        let url = format!("https://{host}:{}/", h.addr.port());
        let s = transfer(&opts(url.clone(), dst.path(), Some(&pki.ca_pem())))
            .unwrap_or_else(|e| panic!("{url}: {e:#}"));
        common::assert_same_tree(src.path(), dst.path(), &rels);
        assert_eq!(s.files_verified_checksum, rels.len());
    }
}

#[test]
fn certificate_errors_name_the_cause_and_the_fix() {
    let pki = TestPki::new();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("f.bin"), common::bytes(7, 10_000)).unwrap();
    let dst = tempfile::tempdir().unwrap();

    // signed by a CA the system store does not have
    let good = pki.server("good", &["localhost"], Validity::Current);
    let h = tls_server(src.path(), &good);
    let url = format!("https://localhost:{}/f.bin", h.addr.port());
    let err = transfer(&opts(url.clone(), dst.path(), None)).unwrap_err();
    assert!(matches!(err, TransferError::Tls { .. }), "{err:?}");
    let e = failure(&opts(url.clone(), dst.path(), None));
    assert!(
        e.contains("unknown certificate authority") && e.contains("--cacert"),
        "{e}"
    );
    // --insecure gets the bytes anyway
    let mut o = opts(url, dst.path(), None);
    o.data.tls.insecure = true;
    transfer(&o).unwrap();
    assert_eq!(
        std::fs::read(dst.path().join("f.bin")).unwrap(),
        common::bytes(7, 10_000)
    );
    drop(h);

    // issued for another name; expired
    for (cert, want) in [
        (
            pki.server("other", &["other.example"], Validity::Current),
            "not valid for the name localhost but for other.example;",
        ),
        (
            pki.server("old", &["localhost"], Validity::Expired),
            "expired on 2001-01-01 00:00:00 UTC",
        ),
    ] {
        let h = tls_server(src.path(), &cert);
        let url = format!("https://localhost:{}/f.bin", h.addr.port());
        let e = failure(&opts(url, dst.path(), Some(&pki.ca_pem())));
        assert!(e.contains(want), "{e}");
    }

    // an HTTPS URL for a plain HTTP server
    let plain = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let e = failure(&opts(
        format!("https://127.0.0.1:{}/f.bin", plain.addr.port()),
        dst.path(),
        Some(&pki.ca_pem()),
    ));
    assert!(
        e.contains("TLS handshake with 127.0.0.1 failed: the server did not answer in TLS"),
        "{e}"
    );
}

/// A self-signed certificate marked as a CA (what `openssl req -x509` makes): refused by the
/// system store with its own message, trusted when `--cacert` holds that very certificate (as
/// curl does), and then still checked for the host name.
#[test]
fn self_signed_certificate_given_with_cacert() {
    let pki = TestPki::new();
    let cert = pki.self_signed("selfsigned", &["localhost"]);
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    let h = tls_server(src.path(), &cert);
    let port = h.addr.port();
    let dst = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{port}/");
    let e = failure(&opts(url.clone(), dst.path(), None));
    assert!(
        e.contains("a CA certificate used as the server's own"),
        "{e}"
    );
    transfer(&opts(url, dst.path(), Some(&cert.cert))).unwrap_or_else(|e| panic!("{e:#}"));
    common::assert_same_tree(src.path(), dst.path(), &rels);
    let e = failure(&opts(
        format!("https://127.0.0.1:{port}/"),
        dst.path(),
        Some(&cert.cert),
    ));
    assert!(e.contains("not valid for the name 127.0.0.1"), "{e}");
}

/// nginx over TLS: a default server that refuses every handshake and a `localhost` server with
/// the dataset, so the transfer only works if the client sends SNI; byte-identical results.
#[test]
fn nginx_over_tls_with_sni() {
    let pki = TestPki::new();
    let cert = pki.server("nginx", &["localhost"], Validity::Current);
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    wattio_http::write_listing(src.path()).unwrap();
    let Some(ng) = common::Nginx::start_servers(|port| {
        format!(
            "server {{ listen 127.0.0.1:{port} ssl default_server; ssl_reject_handshake on; }}\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name localhost; root {};\n\
               ssl_certificate {}; ssl_certificate_key {}; }}\n",
            src.path().display(),
            cert.cert.display(),
            cert.key.display()
        )
    }) else {
        return;
    };
    let dst = tempfile::tempdir().unwrap();
    let s = transfer(&opts(
        format!("https://localhost:{}/.wattio/listing.json", ng.port),
        dst.path(),
        Some(&pki.ca_pem()),
    ))
    .unwrap_or_else(|e| panic!("{e:#}"));
    common::assert_same_tree(src.path(), dst.path(), &rels);
    assert_eq!(s.files_verified_checksum, rels.len());
    // without SNI (an IP address) nginx's default server refuses the handshake
    let dst = tempfile::tempdir().unwrap();
    let e = failure(&opts(
        format!("https://127.0.0.1:{}/.wattio/listing.json", ng.port),
        dst.path(),
        Some(&pki.ca_pem()),
    ));
    assert!(
        e.contains("failed: the server refused it (TLS alert: unrecognised name)"),
        "{e}"
    );
}

/// An HTTPS server that answers every request with a body of unknown length (no
/// Content-Length, not chunked) ended by closing the connection: with TLS's `close_notify`
/// when `notify`, else by dropping TCP, as a connection cut short would. Serves until the
/// returned runtime is dropped.
fn unterminated_tls_server(
    cert: &common::certs::ServerCert,
    body: Vec<u8>,
    notify: bool,
) -> (tokio::runtime::Runtime, u16) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = tls_server_config(&cert.cert, &cert.key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::sync::Arc::new(body);
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut b).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let mut out = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
                if !head.starts_with(b"HEAD") {
                    out.extend_from_slice(&body);
                }
                let _ = tls.write_all(&out).await;
                let _ = tls.flush().await;
                if notify {
                    let _ = tls.shutdown().await;
                }
                // else dropped: TCP ends with no close_notify
            });
        }
    });
    (rt, port)
}

/// A body of unknown length over TLS is trusted only when the server ends it with
/// `close_notify`: without it, the end cannot be told from a cut connection, and the
/// transfer refuses it, saying so.
#[test]
fn a_tls_body_of_unknown_length_needs_close_notify() {
    let pki = TestPki::new();
    let cert = pki.server("localhost", &["127.0.0.1"], Validity::Current);
    let body = common::bytes(9, 200_000);
    for notify in [true, false] {
        let (_rt, port) = unterminated_tls_server(&cert, body.clone(), notify);
        let dst = tempfile::tempdir().unwrap();
        let mut o = opts(
            format!("https://127.0.0.1:{port}/f.bin"),
            dst.path(),
            Some(&pki.ca_pem()),
        );
        o.data.retries = 1;
        if notify {
            transfer(&o).unwrap_or_else(|e| panic!("{e:#}"));
            assert_eq!(std::fs::read(dst.path().join("f.bin")).unwrap(), body);
        } else {
            let err = transfer(&o).unwrap_err();
            assert!(matches!(err, TransferError::Protocol { .. }), "{err:?}");
            let e = failure(&o);
            assert!(e.contains("close_notify"), "{e}");
            assert!(!dst.path().join("f.bin").exists());
        }
    }
}
