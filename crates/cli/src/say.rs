//! What wattio tells on standard error besides its errors, from one place with one prefix,
//! `wattio <command>: `: warnings (`wattio top: warning: …`), for what may make a figure
//! wrong or a run incomplete, and notes, for what is only worth knowing, which `--quiet`
//! silences (warnings and errors never are). Written with `eprintln!`, whose panic on a closed
//! standard error `main` turns into the quiet exit a closed pipe gets (see `closed_pipe`), after
//! the command's destructors have flushed what it wrote; escaped, since a message may carry a
//! name a peer chose.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static QUIET: AtomicBool = AtomicBool::new(false);
static COMMAND: Mutex<&'static str> = Mutex::new("");

/// The command running (`measure`, `vm publish`), and `--quiet`: set once, by `main` and the
/// command itself.
pub fn set_command(command: &'static str) {
    *COMMAND.lock().unwrap_or_else(|p| p.into_inner()) = command;
}

/// `--quiet`: notes are not written.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// `wattio COMMAND: warning: MSG`.
pub fn warn(msg: impl Display) {
    line("warning: ", &msg.to_string());
}

/// `wattio COMMAND: MSG`, unless `--quiet`.
pub fn note(msg: impl Display) {
    if !QUIET.load(Ordering::Relaxed) {
        line("", &msg.to_string());
    }
}

/// A line under the last note, indented, without the prefix (a table's rows); silenced with it.
pub fn note_detail(msg: impl Display) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("  {}", wattio_transfer::terminal_safe(&msg.to_string()));
    }
}

fn line(kind: &str, msg: &str) {
    let command = *COMMAND.lock().unwrap_or_else(|p| p.into_inner());
    let msg = wattio_transfer::terminal_safe(msg);
    eprintln!("wattio {command}: {kind}{msg}");
}
