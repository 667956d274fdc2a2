//! [`ServerHandle`]: a server on a thread and runtime of its own, for tests and benchmarks.

use crate::config::ServerConfig;
use crate::error::HttpError;
use crate::server::Server;
use std::net::SocketAddr;

/// A server running on its own thread and runtime (tests, benches). Dropping it stops the
/// runtime, which drops every connection at once, as a killed server would.
pub struct ServerHandle {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Starts a server for `cfg` on `addr` (e.g. `127.0.0.1:0`).
    pub fn start(cfg: ServerConfig, addr: &str) -> Result<ServerHandle, HttpError> {
        let (tx_addr, rx_addr) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let addr = addr.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let server = match Server::bind(cfg, &addr).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx_addr.send(Err(e));
                        return;
                    }
                };
                let _ = tx_addr.send(Ok(server.local_addr().expect("bound")));
                tokio::select! {
                    _ = server.run() => {}
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_background();
        });
        let addr = rx_addr.recv().map_err(|_| HttpError::ServerThread)??;
        Ok(ServerHandle {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
