//! Helpers shared by the CLI test binaries.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ChildStderr;
use std::time::{Duration, Instant};

/// The `HOST:PORT` a starting `wattio export` prints on stderr (`… http://ADDR/metrics …`).
pub fn exporter_addr(stderr: ChildStderr) -> String {
    let mut err = BufReader::new(stderr);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.split("http://").nth(1) {
            return rest.split('/').next().unwrap().to_string();
        }
    }
    panic!("the exporter did not print its address");
}

/// Sends `request` as is and returns the whole response.
pub fn http(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}
