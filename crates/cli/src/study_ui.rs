//! The terminal side of the long studies (`wattio iobench`, `wattio overhead`): the
//! Ctrl-C/SIGTERM handler that cancels them, their progress bar, and what is said when one is
//! interrupted. The handler is the binary's only one: `measure`, `record`, `export`, `top`,
//! `calibrate` and `fixture tick` stop through it too. The libraries themselves only take a
//! cancel flag and a progress callback (`wattio-progress`).

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use wattio_progress::{Cancel, Sink, StudyProgress};
use wattio_units::format_duration_rounded;

/// The signal that cancelled the study (0: none yet).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// A cancel flag set by SIGINT or SIGTERM, from a thread of its own.
pub fn cancel_on_signals() -> Result<Arc<Cancel>> {
    let cancel = Arc::new(Cancel::new().context("creating the cancel flag")?);
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("installing the SIGINT/SIGTERM handler")?;
    let flag = Arc::clone(&cancel);
    std::thread::Builder::new()
        .name("wattio-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                flag.set();
            }
        })
        .context("starting the signal thread")?;
    Ok(cancel)
}

/// The name of the signal that set the cancel flag ("SIGINT" before any).
pub fn interrupting_signal() -> &'static str {
    match SIGNAL.load(Ordering::SeqCst) {
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "SIGINT",
    }
}

/// The shell's convention for a command ended by a signal: 128 + its number (130 for
/// Ctrl-C, 143 for SIGTERM).
pub fn interrupted_exit_code() -> ExitCode {
    let sig = match SIGNAL.load(Ordering::SeqCst) {
        0 => signal_hook::consts::SIGINT,
        s => s,
    };
    ExitCode::from((128 + sig).clamp(0, 255) as u8)
}

/// The command line that continues the study in `dir`: this one, with `--resume DIR` after
/// the subcommand (before a trailing `-- CMD`) unless it has it already.
pub fn resume_command(dir: &Path) -> String {
    let args: Vec<String> = std::env::args().collect();
    let mut words: Vec<String> = args
        .iter()
        .map(|a| wattio_meter::measure::shell_quote(a))
        .collect();
    let before_cmd = args.iter().position(|a| a == "--").unwrap_or(args.len());
    if !args[..before_cmd]
        .iter()
        .any(|a| a == "--resume" || a.starts_with("--resume="))
    {
        let at = 2.min(words.len());
        words.insert(at, "--resume".into());
        words.insert(
            at + 1,
            wattio_meter::measure::shell_quote(&dir.display().to_string()),
        );
    }
    words.join(" ")
}

/// Says how much of an interrupted study is kept and how to continue it (one line on
/// stderr); the exit code to leave with.
pub fn interrupted(study: &str, kept: usize, total: usize, dir: &Path, files: &str) -> ExitCode {
    eprintln!(
        "{study}: interrupted: {kept} of {total} runs kept in {} ({files}); continue with: {}",
        dir.display(),
        resume_command(dir)
    );
    interrupted_exit_code()
}

/// The `-o`/`--resume` pair: the directory the study writes to, and whether it resumes.
pub fn output_dir(
    output: Option<&Path>,
    resume: Option<&Path>,
    default: impl FnOnce() -> std::path::PathBuf,
) -> Result<(std::path::PathBuf, bool)> {
    match (output, resume) {
        (Some(o), Some(r)) if o != r => anyhow::bail!(
            "-o {} and --resume {} name two directories: --resume DIR continues the study in DIR, give it alone",
            o.display(),
            r.display()
        ),
        (_, Some(r)) => Ok((r.to_path_buf(), true)),
        (Some(o), None) => Ok((o.to_path_buf(), false)),
        (None, None) => Ok((default(), false)),
    }
}

/// A progress bar on stderr (drawn only when stderr is a terminal) showing runs done and
/// the study's own ETA, which comes from measured run times.
#[derive(Clone)]
pub struct StudyBar(ProgressBar);

impl StudyBar {
    pub fn new() -> StudyBar {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        StudyBar(pb)
    }

    /// The progress callback a study reports to: each update is shown on this bar.
    pub fn progress_sink(&self) -> Sink<StudyProgress> {
        let bar = self.clone();
        Sink::new(move |p: &StudyProgress| bar.show(p))
    }

    /// A callback for a study's messages: each is printed above this bar as `{prefix}: {m}`.
    pub fn message_sink(&self, prefix: &'static str) -> Sink<str> {
        let bar = self.clone();
        Sink::new(move |m: &str| bar.println(&format!("{prefix}: {m}")))
    }

    /// Shows `p`.
    fn show(&self, p: &StudyProgress) {
        self.0.set_length(p.total as u64);
        self.0.set_position(p.done as u64);
        let eta = p
            .eta
            .map(|d| format!("  (ETA {})", format_duration_rounded(d)))
            .unwrap_or_default();
        self.0.set_message(format!("{}{eta}", p.label));
    }

    /// Prints `line` above the bar.
    pub fn println(&self, line: &str) {
        self.0.suspend(|| eprintln!("{line}"));
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
