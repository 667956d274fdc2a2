//! `Conn::send` puts every byte on the wire before it returns. Over TLS, tokio-rustls's
//! `poll_write` reports bytes as written once rustls holds them, even when the socket would
//! block: after a bare `write_all` into a full socket, the last record can stay in rustls's
//! buffer, and a request left there is never answered (a transfer's last range over HTTPS
//! waited for its 60 s head timeout, in half of the runs of one 4 GiB file).

mod common;

use common::certs::{ServerCert, TestPki, Validity};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpSocket;
use wattio_http::tls::{self, ClientTlsOptions, Conn};

/// Socket buffers this small fill at once, so the client's last write meets a full socket.
const BUFFER: u32 = 64 << 10;
const PAYLOAD: usize = 8 << 20;

/// Three connections: whether the last record meets a full socket is a race, which a bare
/// `write_all` lost in two of three single rounds here.
#[tokio::test]
async fn everything_sent_reaches_the_peer_though_the_socket_was_full() {
    let pki = TestPki::new();
    let cert = pki.server("send", &["localhost"], Validity::Current);
    for round in 0..3 {
        one_connection(&pki, &cert, round).await;
    }
}

async fn one_connection(pki: &TestPki, cert: &ServerCert, round: u64) {
    let server_cfg = tls::tls_server_config(&cert.cert, &cert.key).unwrap();
    let listener = TcpSocket::new_v4().unwrap();
    listener.set_recv_buffer_size(BUFFER).unwrap();
    listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = listener.listen(1).unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut s = tokio_rustls::TlsAcceptor::from(server_cfg)
            .accept(tcp)
            .await
            .unwrap();
        // reads all but the last MiB, pauses (the client's socket fills), then the rest
        let mut got = vec![0u8; PAYLOAD];
        let (head, tail) = got.split_at_mut(PAYLOAD - (1 << 20));
        tokio::time::sleep(Duration::from_millis(200)).await;
        s.read_exact(head).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        s.read_exact(tail).await.unwrap();
        got
    });
    let opts = ClientTlsOptions {
        cacert: Some(pki.ca_pem()),
        ..Default::default()
    };
    let client_cfg = tls::client_config(&opts, true).unwrap();
    let tcp = TcpSocket::new_v4().unwrap();
    tcp.set_send_buffer_size(BUFFER).unwrap();
    let tcp = tcp.connect(addr).await.unwrap();
    let s = tokio_rustls::TlsConnector::from(client_cfg)
        .connect(tls::server_name("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let mut conn = Conn::Tls(Box::new(s.into()));
    let data = common::bytes(7 + round, PAYLOAD);
    conn.send(&data).await.unwrap();
    // the client writes nothing more and keeps the connection open, as a channel waiting for
    // its answer does
    let got = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "round {round}: the peer never got the last bytes: they stayed in the TLS buffer"
            )
        })
        .unwrap();
    assert!(got == data, "the peer got other bytes than were sent");
    drop(conn);
}
