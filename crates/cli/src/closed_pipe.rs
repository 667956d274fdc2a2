//! A reader that closes its end of wattio's output (`wattio record | head -n1`) ends the
//! command quietly: no message, exit status 141 (128 + SIGPIPE, what a shell reports for a
//! command SIGPIPE killed, so `set -o pipefail` scripts see what they see with `seq | head`).
//!
//! wattio does **not** restore the default SIGPIPE action (the C behaviour, and the usual
//! one-line fix in Rust): the signal kills the process where it stands, so rows still in a
//! `BufWriter` to an output file are lost, testbed namespaces and child processes are left
//! behind, and `wattio serve` would die whenever a client went away during `sendfile`. SIGPIPE
//! stays ignored (Rust's default): the write fails with EPIPE and the command ends through its
//! normal path, destructors included, so everything it wrote to files is flushed and what it
//! started is cleaned up. EPIPE reaches `main` in one of two ways, both handled here:
//!
//! * as an error the command returns (`io::ErrorKind::BrokenPipe` somewhere in the chain);
//! * as a panic of `println!`/`eprintln!`, which panic when the write fails: the panic hook
//!   keeps quiet about these and `main` catches the unwind (so the release profile must keep
//!   `panic = "unwind"`, the default).
//!
//! Only when standard output or standard error really is a pipe or socket whose reader is gone
//! (`poll` reports `POLLERR`); an EPIPE from some other socket stays an error.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::any::Any;
use std::io;
use std::process::ExitCode;

/// 128 + SIGPIPE.
pub const EXIT_STATUS: u8 = 141;

/// Keeps the panic hook quiet about prints to a closed pipe; other panics report as before.
pub fn quiet_print_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_closed_pipe_print(info.payload()) {
            default(info)
        }
    }));
}

/// Whether a panic is std's print macros failing on a closed standard output or error.
pub fn is_closed_pipe_print(payload: &(dyn Any + Send)) -> bool {
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied());
    // `print!` and friends panic with "failed printing to stdout: {io::Error}".
    let epipe = io::Error::from_raw_os_error(rustix::io::Errno::PIPE.raw_os_error()).to_string();
    message.is_some_and(|m| m.starts_with("failed printing to std") && m.ends_with(&epipe))
        && output_closed()
}

/// Whether a command's error is a write to a closed standard output or error.
pub fn is_closed_pipe_error(e: &anyhow::Error) -> bool {
    let broken_pipe = |c: &(dyn std::error::Error + 'static)| {
        let kind = c
            .downcast_ref::<io::Error>()
            .map(io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind());
        kind == Some(io::ErrorKind::BrokenPipe)
    };
    e.chain().any(broken_pipe) && output_closed()
}

/// The exit status for a command that ended on a closed pipe.
pub fn exit_code() -> ExitCode {
    ExitCode::from(EXIT_STATUS)
}

/// Whether standard output or standard error is a pipe (or socket) nobody reads any more.
fn output_closed() -> bool {
    let (stdout, stderr) = (io::stdout(), io::stderr());
    let mut fds = [
        PollFd::new(&stdout, PollFlags::OUT),
        PollFd::new(&stderr, PollFlags::OUT),
    ];
    // A zero timeout: this asks for the state now and never blocks.
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&zero)).is_ok()
        && fds.iter().any(|fd| fd.revents().contains(PollFlags::ERR))
}
