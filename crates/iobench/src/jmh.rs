//! How the study runs one JMH invocation: the [`JmhExecutor`] trait its rounds talk to, and
//! [`ProcessJmhExecutor`], which starts the JMH host JVM (and so its forks) and streams the
//! runs from the energy socket as they finish.

use crate::invocation::Invocation;
use crate::maven;
use crate::server::{EnergyServer, EnergyServerEvent};
use crate::IoBenchError;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wattio_progress::Cancel;
use wattio_runner::GroupChild;

/// How one JMH invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvocationEnd {
    /// JMH exited by itself.
    Exited {
        success: bool,
        /// The exit status, in words.
        status: String,
        /// The first exception line of this invocation's output, or its last line.
        failure: String,
    },
    /// The study was cancelled: JMH and its forks were ended.
    Cancelled,
}

/// Runs JMH invocations. The study's rounds only talk to this, so their order, resume and
/// collection are tested with fakes; [`ProcessJmhExecutor`] is the real one.
pub trait JmhExecutor {
    /// Runs `inv` (of round `round`, 1-based), handing every event of the energy socket to
    /// `on_event` as it arrives. An error from `on_event` ends JMH and is returned.
    fn run_invocation(
        &mut self,
        round: u32,
        inv: &Invocation,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(EnergyServerEvent) -> Result<(), IoBenchError>,
    ) -> Result<InvocationEnd, IoBenchError>;

    /// Where JMH's output goes (named in error messages).
    fn log_path(&self) -> &Path;
}

/// Starts `java -jar benchmarks.jar …` in its own process group with the energy socket and
/// data directory in its environment, JMH's output appended to `jmh.log`.
pub struct ProcessJmhExecutor {
    pub java: String,
    /// The study's private copy of the benchmarks jar.
    pub jar: PathBuf,
    /// Options of the benchmark forks (`-jvmArgs`).
    pub jvm_args: String,
    pub data_dir: PathBuf,
    /// JMH's working directory.
    pub scratch: PathBuf,
    pub server: EnergyServer,
    pub jmh_log: File,
    pub log_path: PathBuf,
}

/// How long a wait for the next run lasts before JMH's exit and the cancel flag are checked.
const POLL: Duration = Duration::from_millis(100);

impl ProcessJmhExecutor {
    fn command(&self, inv: &Invocation) -> std::io::Result<Command> {
        let mut cmd = Command::new(&self.java);
        // The host JVM only launches forks: keep it light. Forks get exactly `jvm_args`.
        cmd.args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar"])
            .arg(&self.jar)
            .args([
                "-bm", "ss", "-wi", "0", "-i", "1", "-f", "1", "-foe", "true",
            ])
            .args(["-jvmArgs", &self.jvm_args])
            .arg("-p")
            .arg(format!(
                "size={}",
                inv.sizes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ))
            .args(inv.includes())
            .args(inv.params())
            .env("WATTIO_IOBENCH_SOCKET", self.server.path())
            .env("WATTIO_IOBENCH_DATA", &self.data_dir)
            .current_dir(&self.scratch)
            .stdin(Stdio::null())
            // JMH writes straight into the log, so a long round can be followed with tail -f.
            .stdout(Stdio::from(self.jmh_log.try_clone()?))
            .stderr(Stdio::from(self.jmh_log.try_clone()?));
        Ok(cmd)
    }
}

impl JmhExecutor for ProcessJmhExecutor {
    fn run_invocation(
        &mut self,
        round: u32,
        inv: &Invocation,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(EnergyServerEvent) -> Result<(), IoBenchError>,
    ) -> Result<InvocationEnd, IoBenchError> {
        let log_err = IoBenchError::io(format!("writing {}", self.log_path.display()));
        let start = writeln!(self.jmh_log, "=== round {round} {:?}", inv.includes())
            .and_then(|()| self.jmh_log.flush())
            .and_then(|()| self.jmh_log.metadata())
            .map_err(log_err)?
            .len();
        let mut cmd = self.command(inv).map_err(IoBenchError::io(format!(
            "opening {} for JMH",
            self.log_path.display()
        )))?;
        let mut jmh = GroupChild::spawn(&mut cmd).map_err(|e| maven::java_error(&self.java, e))?;
        let java = &self.java;
        let waiting = |err| IoBenchError::Io {
            what: format!("waiting for JMH ({java})"),
            err,
        };
        // Dropping `jmh` (cancel, error) kills the host JVM and its forks.
        loop {
            if cancel.is_set() {
                drop(jmh);
                self.server.drain();
                return Ok(InvocationEnd::Cancelled);
            }
            if let Some(ev) = self.server.recv_timeout(POLL) {
                on_event(ev)?;
                continue;
            }
            if jmh.child_mut().try_wait().map_err(waiting)?.is_some() {
                let status = jmh.wait().map_err(waiting)?;
                // A fork's run is on the channel before the fork hears OK, so before JMH ends.
                for ev in self.server.drain() {
                    on_event(ev)?;
                }
                let text = std::fs::read(&self.log_path).unwrap_or_default();
                let this =
                    String::from_utf8_lossy(&text[(start as usize).min(text.len())..]).into_owned();
                return Ok(InvocationEnd::Exited {
                    success: status.success(),
                    status: status.to_string(),
                    failure: jmh_failure(&this),
                });
            }
        }
    }

    fn log_path(&self) -> &Path {
        &self.log_path
    }
}

/// The first exception line JMH printed, or its last line.
pub(crate) fn jmh_failure(stdout: &str) -> String {
    if stdout.contains("Unable to acquire the JMH lock") {
        return "another JMH run holds /tmp/jmh.lock (concurrent benchmarks disturb each other): wait for it to finish".into();
    }
    stdout
        .lines()
        .find(|l| {
            l.contains("Exception")
                || l.contains("<failure>")
                || l.contains("Error:")
                || l.starts_with("ERROR")
        })
        .or_else(|| stdout.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no output")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jmh_failures_are_summarised() {
        assert!(
            jmh_failure("x\nERROR: ... Unable to acquire the JMH lock (/tmp/jmh.lock)")
                .contains("another JMH run")
        );
        assert_eq!(
            jmh_failure("a\njava.lang.IllegalStateException: bad\nb"),
            "java.lang.IllegalStateException: bad"
        );
        assert_eq!(jmh_failure(""), "no output");
    }
}
