//! wattio-http: the HTTP/1.1 side of wattio's transfer tools, shared by `wattio serve` and
//! the `wattio transfer` client (crate `wattio-transfer`).
//!
//! - `wattio serve`: [`Server`] / [`ServerHandle`] with a [`ServerConfig`], a static-file
//!   server (Range, conditional requests, keep-alive, pipelining, sendfile, a JSON dataset
//!   listing with XXH3-64 checksums written by [`write_listing`] and read by [`Listing`], path
//!   confinement, per-client and descriptor limits, deadlines on every wait).
//! - The protocol the client needs: [`parse_response_head`] into a [`ResponseHead`],
//!   [`ContentRange`], and path percent-encoding. The request side (request heads, `Range`,
//!   conditions) is the server's own.
//! - Three namespaces stay public because their items read as such under them:
//!   [`checksum`] (the digest algorithms of listings and checksum files: `checksum::to_hex`,
//!   `checksum::Algorithm`), [`jail`] (opening beneath a directory without following links:
//!   `jail::open_beneath`, `jail::Create`) and [`tls`] (rustls for server and client:
//!   `tls::client_config`, `tls::Conn`).
//!
//! Everything a peer sends is parsed by code that is fuzzed (`make fuzz`); the harness is the
//! `fuzzing` feature's [`fuzzing`] module, which the client's parsers use too.

pub mod checksum;
mod civil;
mod config;
mod confine;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod handle;
mod index;
pub mod jail;
mod limits;
mod listing;
mod mime;
mod pages;
mod protocol;
mod reply;
mod server;
pub mod tls;
mod waiting;

pub use config::ServerConfig;
pub use error::{chain_line, HttpError};
pub use handle::ServerHandle;
pub use listing::{
    is_safe_relative, write_listing, ListedBlocks, ListedFile, Listing, LISTING_PATH,
};
pub use protocol::{
    parse_response_head, percent_decode, percent_encode_path, ContentRange, ResponseError,
    ResponseHead, MAX_RESPONSE_HEAD,
};
pub use server::Server;
pub use tls::{tls_server_config, ClientTlsOptions};
