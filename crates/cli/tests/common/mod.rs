//! Helpers shared by the CLI test binaries (each binary uses some of them).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Output};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_wattio");

/// Runs the wattio binary with `args`, under the fixture `root` or the real machine.
pub fn wattio(root: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    match root {
        Some(r) => c.env("WATTIO_ROOT", r),
        None => c.env_remove("WATTIO_ROOT"),
    };
    c.output().expect("run wattio")
}

/// Kills and reaps children even when the test fails.
pub struct Reaper(pub Vec<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

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
