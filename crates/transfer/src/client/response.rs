//! Reading responses: a buffer that parses heads with [`crate::http::parse_response_head`]
//! and hands over the bytes behind them, and a one-shot request for listings and `HEAD`s.

use super::conn::Connector;
use super::url::HttpUrl;
use crate::http::{parse_response_head, ResponseHead};
use anyhow::{anyhow, bail};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// A simple one-shot request on a fresh connection: status, headers (lower-case), body.
pub(super) async fn simple_request(
    connector: &Connector,
    url: &HttpUrl,
    method: &str,
    path: &str,
) -> anyhow::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut s = connector.connect(url).await?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wattio\r\nConnection: close\r\n\r\n",
        url.authority()
    );
    s.write_all(req.as_bytes()).await?;
    let mut rb = ReadBuf::default();
    let head = tokio::time::timeout(Duration::from_secs(60), rb.read_head(&mut s))
        .await
        .map_err(|_| anyhow!("{} did not answer within 60 s", url.authority()))??;
    let mut body = Vec::new();
    if method != "HEAD" {
        let len = head
            .content_length
            .ok_or_else(|| anyhow!("{}{path}: response without Content-Length", url.authority()))?;
        if len > 1 << 30 {
            bail!("{}{path}: listing larger than 1 GiB", url.authority());
        }
        body.reserve(len as usize);
        let take = rb.take(len as usize);
        body.extend_from_slice(&take);
        while (body.len() as u64) < len {
            let mut tmp = vec![0u8; 64 * 1024];
            let n = s.read(&mut tmp).await?;
            if n == 0 {
                bail!("{}{path}: connection closed mid-body", url.authority());
            }
            body.extend_from_slice(&tmp[..n]);
        }
        body.truncate(len as usize);
    }
    Ok((head.status, head.headers, body))
}

/// Bytes read from a connection and not consumed yet: the rest of a head's packet belongs to
/// the body (or to the next pipelined response).
#[derive(Default)]
pub(super) struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl ReadBuf {
    /// The buffered bytes not consumed yet.
    pub(super) fn avail(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Consumes up to `max` buffered bytes.
    pub(super) fn take(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.buf.len() - self.pos);
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }

    /// Reads until a whole response head is buffered and consumes it. Bodies delimited
    /// otherwise than by `Content-Length` are refused.
    pub(super) async fn read_head<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
    ) -> anyhow::Result<ResponseHead> {
        loop {
            if self.pos > 0 && self.pos == self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            }
            if let Some((h, n)) = parse_response_head(self.avail())? {
                if let Some(te) = &h.transfer_encoding {
                    bail!("server sent Transfer-Encoding {te}; only Content-Length bodies are supported")
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
                bail!("server closed the connection");
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }
}
