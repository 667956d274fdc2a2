//! `wattio record` as the overhead study's recorder: its command line, built in one place,
//! and the running process.

use crate::OverheadError;
use rustix::process::Signal;
use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wattio_energy::attribution::cputime;
use wattio_progress::Cancel;
use wattio_runner::GroupChild;

/// A `wattio record` command line: `record --source S --freq F --format csv -o FILE`.
/// The binary's argument parser is checked against it by a test of `wattio` itself.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordCommand {
    /// The mechanism, as `--source` accepts it (`model`, `perf`, …, or any newer one).
    pub source: String,
    /// Rows per second.
    pub freq_hz: f64,
    /// The CSV file the rows go to.
    pub output: PathBuf,
}

impl RecordCommand {
    /// Records with `source` at `freq_hz` as CSV into `output`.
    pub fn new(source: &str, freq_hz: f64, output: &Path) -> RecordCommand {
        RecordCommand {
            source: source.to_string(),
            freq_hz,
            output: output.to_path_buf(),
        }
    }

    /// The arguments after the executable.
    pub fn args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = [
            "record",
            "--source",
            &self.source,
            "--freq",
            &self.freq_hz.to_string(),
            "--format",
            "csv",
            "-o",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        v.push(self.output.clone().into_os_string());
        v
    }

    /// The command for the `wattio` executable `exe`.
    pub fn command(&self, exe: &Path) -> Command {
        let mut c = Command::new(exe);
        c.args(self.args());
        c
    }
}

/// What a recorder did while it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RecorderStats {
    /// Data rows it wrote.
    pub samples: u64,
    /// Seconds from its header being on disk to its SIGTERM.
    pub ran_s: f64,
    /// Its user + system CPU time (`wait4` rusage).
    pub cpu_s: f64,
}

/// A running `wattio record`.
pub(crate) struct Recorder {
    child: GroupChild,
    /// When the header appeared (sampling started).
    ready: Instant,
    cmd: RecordCommand,
    err: PathBuf,
}

impl Recorder {
    /// Starts `cmd` with `exe` and returns once its CSV header is on disk: the source is open
    /// and sampling. Gives up after 10 s.
    pub(crate) fn start(
        exe: &Path,
        cmd: RecordCommand,
        err: PathBuf,
        cancel: &Cancel,
    ) -> Result<Recorder, OverheadError> {
        let _ = std::fs::remove_file(&cmd.output);
        let child = GroupChild::spawn(
            cmd.command(exe)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&err)?),
        )
        .map_err(|e| OverheadError::Spawn {
            cmd: exe.display().to_string(),
            source: e,
        })?;
        let mut r = Recorder {
            child,
            ready: Instant::now(),
            cmd,
            err,
        };
        let t0 = Instant::now();
        loop {
            if r.child.child_mut().try_wait()?.is_some() {
                return Err(r.died());
            }
            if std::fs::metadata(&r.cmd.output).is_ok_and(|m| m.len() > 0) {
                r.ready = Instant::now();
                return Ok(r);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(OverheadError::RecorderSlow(r.cmd.source.clone()));
            }
            if cancel.sleep(Duration::from_millis(5)) {
                return Err(OverheadError::Cancelled);
            }
        }
    }

    fn died(&self) -> OverheadError {
        recorder_died(&self.cmd, &self.err)
    }

    /// SIGTERM, reap with `wait4` (`cputime::wait_child`) for the CPU time, count data rows.
    pub(crate) fn stop(self) -> Result<RecorderStats, OverheadError> {
        use std::os::unix::process::ExitStatusExt;
        let Recorder {
            child,
            ready,
            cmd,
            err,
        } = self;
        let ran = ready.elapsed().as_secs_f64();
        child.signal_group(Signal::TERM)?;
        let usage = cputime::wait_child(child.into_child())?;
        let terminated_by_us = usage.status.signal() == Some(Signal::TERM.as_raw());
        if !(usage.status.code() == Some(0) || terminated_by_us) {
            return Err(recorder_died(&cmd, &err));
        }
        let samples = std::fs::File::open(&cmd.output)
            .map(|f| std::io::BufReader::new(f).lines().count().saturating_sub(1) as u64)
            .unwrap_or(0);
        let _ = std::fs::remove_file(&cmd.output);
        Ok(RecorderStats {
            samples,
            ran_s: ran,
            cpu_s: usage.cpu_s,
        })
    }
}

/// The recorder's last words (the last non-empty line of its stderr).
fn recorder_died(cmd: &RecordCommand, err: &Path) -> OverheadError {
    let stderr = std::fs::read_to_string(err).unwrap_or_default();
    OverheadError::RecorderDied {
        mechanism: cmd.source.clone(),
        freq: cmd.freq_hz,
        stderr: stderr
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_built_in_one_place() {
        let c = RecordCommand::new("ebpf", 0.1, Path::new("/tmp/r.csv"));
        let args: Vec<String> = c
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "record",
                "--source",
                "ebpf",
                "--freq",
                "0.1",
                "--format",
                "csv",
                "-o",
                "/tmp/r.csv"
            ]
        );
        assert_eq!(c.command(Path::new("wattio")).get_args().count(), 9);
    }
}
