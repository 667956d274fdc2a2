//! The little HTTP/1.1 a name lookup needs: one GET on a stream the caller opened (a runtime's
//! Unix socket, a TLS connection to the Kubernetes API), its head, and its body read as it
//! comes (`Content-Length`, chunked, or to the end), never more than a bound.

use std::io::{self, BufRead, BufReader, Read, Write};

/// The most a response head may take.
const MAX_HEAD: usize = 64 * 1024;

/// A response whose head was read; its body is read through [`Response::body`].
pub(crate) struct Response<S: Read> {
    pub status: u16,
    /// The `Server` header, where one was sent (`Libpod/…` says podman answered).
    pub server: Option<String>,
    body: Body<BufReader<S>>,
}

enum Body<R> {
    Length(io::Take<R>),
    Chunked(Chunked<R>),
    ToEnd(R),
}

/// Sends `GET target` with `headers` on `stream`, and reads the answer's head.
pub(crate) fn get<S: Read + Write>(
    mut stream: S,
    host: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> io::Result<Response<S>> {
    let mut req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    stream.flush()?;
    let mut r = BufReader::new(stream);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let n = r.by_ref().take(1024).read_until(b'\n', &mut head)?;
        if n == 0 {
            return Err(invalid(
                "the peer closed the connection before its answer's head ended",
            ));
        }
        if head.len() > MAX_HEAD {
            return Err(invalid("an answer's head over 64 KiB"));
        }
    }
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut hs);
    parsed
        .parse(&head)
        .map_err(|e| invalid(&format!("not an HTTP answer ({e})")))?;
    let status = parsed.code.unwrap_or(0);
    let header = |name: &str| {
        parsed
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    let server = header("server");
    let body = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        Body::Chunked(Chunked {
            inner: r,
            left: 0,
            done: false,
        })
    } else if let Some(n) = header("content-length") {
        let n: u64 = n
            .parse()
            .map_err(|_| invalid("a Content-Length that is not a number"))?;
        Body::Length(r.take(n))
    } else {
        Body::ToEnd(r)
    };
    Ok(Response {
        status,
        server,
        body,
    })
}

impl<S: Read> Response<S> {
    /// The whole body, refused past `max` bytes.
    pub fn body_to_end(self, max: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let limit = max as u64 + 1;
        match self.body {
            Body::Length(r) => r.take(limit).read_to_end(&mut out)?,
            Body::Chunked(c) => c.take(limit).read_to_end(&mut out)?,
            Body::ToEnd(r) => r.take(limit).read_to_end(&mut out)?,
        };
        if out.len() > max {
            return Err(invalid(&format!("an answer over {} MiB", max >> 20)));
        }
        Ok(out)
    }

    /// The body as it comes, for a stream of lines (a Kubernetes watch).
    pub fn body_reader(self) -> BufReader<Box<dyn Read + Send>>
    where
        S: Send + 'static,
    {
        let r: Box<dyn Read + Send> = match self.body {
            Body::Length(r) => Box::new(r),
            Body::Chunked(c) => Box::new(c),
            Body::ToEnd(r) => Box::new(r),
        };
        BufReader::new(r)
    }
}

/// A chunked body (RFC 9112, section 7.1), trailers skipped.
struct Chunked<R> {
    inner: R,
    left: u64,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            self.inner.by_ref().take(1024).read_line(&mut line)?;
            let size = line.trim_end().split(';').next().unwrap_or("").trim();
            self.left = u64::from_str_radix(size, 16)
                .map_err(|_| invalid(&format!("a chunk size that is not hexadecimal: {size:?}")))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection inside a chunk",
            ));
        }
        self.left -= n as u64;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
            if &crlf != b"\r\n" {
                return Err(invalid("a chunk not ended by CRLF"));
            }
        }
        Ok(n)
    }
}

/// A stream that fails every read and write after its deadline: a peer that trickles its
/// answer cannot hold the caller longer than that.
pub(crate) struct Deadline<S> {
    pub inner: S,
    pub until: std::time::Instant,
}

impl<S> Deadline<S> {
    fn check(&self) -> io::Result<()> {
        match std::time::Instant::now() < self.until {
            true => Ok(()),
            false => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the answer took past its deadline",
            )),
        }
    }
}

impl<S: Read> Read for Deadline<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Deadline<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A canned answer as the stream, and what the request wrote.
    struct Canned {
        answer: io::Cursor<Vec<u8>>,
        sent: Vec<u8>,
    }
    impl Read for Canned {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.answer.read(b)
        }
    }
    impl Write for Canned {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.sent.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    fn canned(answer: &str) -> Canned {
        Canned {
            answer: io::Cursor::new(answer.as_bytes().to_vec()),
            sent: vec![],
        }
    }

    #[test]
    fn reads_chunked_and_sized_bodies_within_their_bound() {
        let r = get(
            canned("HTTP/1.1 200 OK\r\nServer: Libpod/4.3.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n"),
            "d",
            "/containers/json",
            &[],
        )
        .unwrap();
        assert_eq!((r.status, r.server.as_deref()), (200, Some("Libpod/4.3.1")));
        assert_eq!(r.body_to_end(100).unwrap(), b"hello, world");
        let r = get(
            canned("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabcdef"),
            "d",
            "/",
            &[],
        )
        .unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.body_to_end(100).unwrap(), b"abc");
        let r = get(canned("HTTP/1.1 200 OK\r\n\r\n0123456789"), "d", "/", &[]).unwrap();
        assert!(r.body_to_end(5).unwrap_err().to_string().contains("over"));
        let r = get(
            canned("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            "d",
            "/",
            &[],
        )
        .unwrap();
        assert!(r.body_to_end(5).is_err());
        assert!(get(canned("HTTP/1.1 200 OK\r\n"), "d", "/", &[]).is_err());
    }
}
