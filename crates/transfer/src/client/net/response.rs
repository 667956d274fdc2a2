//! Reading responses: a buffer that parses heads with [`wattio_http::parse_response_head`]
//! and hands over the bytes behind them (one-shot requests for listings, indexes and `HEAD`s
//! are in `fetch`).

use crate::error::{fail, EngineResult};
use tokio::io::{AsyncRead, AsyncReadExt};
use wattio_http::{parse_response_head, ResponseHead};

/// Bytes read from a connection and not consumed yet: the rest of a head's packet belongs to
/// the body (or to the next pipelined response).
#[derive(Default)]
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl ReadBuf {
    /// The buffered bytes not consumed yet.
    pub(crate) fn avail(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Consumes up to `max` buffered bytes.
    pub(crate) fn take(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.buf.len() - self.pos);
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }

    /// Reads until a whole response head is buffered and consumes it. Bodies delimited
    /// otherwise than by `Content-Length` are refused.
    pub(crate) async fn read_head<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
    ) -> EngineResult<ResponseHead> {
        loop {
            if self.pos > 0 && self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            }
            if let Some((h, n)) = parse_response_head(self.avail())? {
                if let Some(te) = &h.transfer_encoding {
                    fail!(
                        Protocol,
                        "server sent Transfer-Encoding {te}; only Content-Length bodies are supported"
                    )
                }
                self.pos += n;
                return Ok(h);
            }
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let mut tmp = [0u8; 16 * 1024];
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                fail!(Protocol, "server closed the connection");
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }
}
