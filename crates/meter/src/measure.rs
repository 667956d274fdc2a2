//! Measuring commands: one run between two meter readings, and benchmarks that compare several
//! commands run after one another (hyperfine for energy).
//!
//! RAPL counters are machine-wide (the perf `power` PMU refuses per-task events), so the
//! `total_j` of a run is the whole machine's energy while the command ran, as with
//! `perf stat -a -e power/...`. The command's own share, `attributed_j`, is its CPU-time share of
//! that total ([`wattio_energy::attribution::share_j`], whose formula is written there once),
//! with the user + system CPU seconds of the command and every descendant it waited for
//! (`wait4` rusage), the online CPUs and the run's duration; it is never more than `total_j`,
//! however small the command.
//!
//! * [`Executor`] runs a [`CommandSpec`] once and reports a [`RunReport`]; [`MeterExecutor`] is
//!   the real one (spawn, `wait4`, two meter snapshots). Tests substitute fakes.
//! * [`bench`](mod@bench) — the run loop: warmups, `--prepare`, round-robin interleaving, failed and
//!   interrupted runs left out, per-command statistics, the comparison with the best command.
//! * [`render`] — the human summary, CSV and Markdown exports.

pub mod bench;
pub mod gate;
mod gpu_share;
pub mod regions;
pub mod render;
pub mod sync;

use crate::meter::{EnergyReport, Meter};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use wattio_energy::attribution::{self, cputime, kernel_io};
use wattio_energy::SysRoot;

/// A command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandSpec {
    /// A shell command line, run with `sh -c` (hyperfine's form).
    Shell(String),
    /// A program and its arguments, run directly (`wattio measure -- prog args…`).
    Argv(Vec<OsString>),
}

impl CommandSpec {
    /// How the command is named in reports: the shell line, or the argv quoted for a shell.
    pub fn display(&self) -> String {
        match self {
            CommandSpec::Shell(s) => s.clone(),
            CommandSpec::Argv(v) => v
                .iter()
                .map(|a| shell_quote(&a.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// The process to spawn, or `None` for an empty argv.
    pub fn command(&self) -> Option<Command> {
        match self {
            CommandSpec::Shell(s) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(s);
                Some(c)
            }
            CommandSpec::Argv(v) => {
                let (prog, args) = v.split_first()?;
                let mut c = Command::new(prog);
                c.args(args);
                Some(c)
            }
        }
    }

    /// The program's name for a spawn error.
    fn program(&self) -> String {
        match self {
            CommandSpec::Shell(_) => "sh".into(),
            CommandSpec::Argv(v) => v
                .first()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }
}

/// `arg` as one shell word: unchanged when it needs no quoting, else in single quotes.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The shell convention: the exit code, or 128 + the signal.
    pub code: i32,
    /// The signal that killed it, when it was killed.
    pub signal: Option<i32>,
}

impl Exit {
    /// Exited with `code`.
    pub fn code(code: i32) -> Exit {
        Exit { code, signal: None }
    }

    /// Killed by signal `sig`.
    pub fn signal(sig: i32) -> Exit {
        Exit {
            code: 128 + sig,
            signal: Some(sig),
        }
    }

    pub fn from_status(status: &ExitStatus) -> Exit {
        Exit {
            code: cputime::shell_code(status),
            signal: status.signal(),
        }
    }

    pub fn success(&self) -> bool {
        self.code == 0 && self.signal.is_none()
    }

    pub fn status(&self) -> RunStatus {
        match (self.signal, self.code) {
            (Some(_), _) => RunStatus::Interrupted,
            (None, 0) => RunStatus::Ok,
            _ => RunStatus::Failed,
        }
    }
}

/// Whether a run counts in the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Exit code 0: kept.
    Ok,
    /// A non-zero exit code: left out (and, without `--ignore-failure`, the benchmark stops).
    Failed,
    /// Killed by a signal: left out.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// `duration_s`, `mechanism`, `estimated`, `model`, `domains`, `total_j` (the machine's),
    /// `psys_j`, `read_errors`.
    #[serde(flatten)]
    pub energy: EnergyReport,
    /// Where `total_j` comes from: `measured (perf)` or `estimated (model: …)`.
    pub total_label: String,
    pub mean_power_w: f64,
    /// User + system CPU seconds of the command and its waited-for descendants (`wait4`).
    pub child_cpu_s: f64,
    /// Online CPUs, the `n` of the split.
    pub n_cpus: usize,
    /// The command's CPU-time share of `total_j` (`attribution::share_j`); never more than
    /// `total_j`.
    #[serde(alias = "command_j")]
    pub attributed_j: f64,
    /// `total_label`, attributed (cpu-time share).
    #[serde(alias = "command_label")]
    pub attributed_label: String,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signal: Option<i32>,
    /// The CO₂e of the energy figures, with `--carbon-intensity` or `--region`.
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub co2e: Option<RunCo2e>,
    /// The command's share of `gpu_j`: its processes' share of each GPU's use during the run
    /// (NVML utilisation samples, or held memory), where NVML says who used the GPUs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_attributed_j: Option<f64>,
    /// How `gpu_attributed_j` was made, e.g. `measured (nvml), attributed (gpu utilisation share)`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_attributed_label: Option<String>,
    /// The writeback the command left dirty, synced and measured after it (not in `total_j`);
    /// absent with `--no-sync` or when the command dirtied nothing.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sync: Option<sync::SyncPhase>,
    /// The kernel's I/O work done for the command during its run (kworker writeback, block
    /// completions, network softirqs), where the kernel I/O program is loaded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_io: Option<KernelIoShare>,
    /// The regions the command measured of its own code, by name ([`regions`]), where it
    /// opened any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub regions: Option<regions::Regions>,
    /// The whole machine, where a platform meter (a BMC, the ACPI power meter, psys) reads
    /// it: its figure over the run and, where sound, the rest RAPL and the GPU meters do not
    /// see ([`crate::MachineView`]).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub machine: Option<crate::MachineView>,
    /// Each disk's estimated energy interval over the run and its split between cgroups or
    /// processes by bytes, where the machine has block devices (`wattio_devices`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub disks: Option<Vec<wattio_devices::DiskEnergyRow>>,
    /// Each network interface's estimated energy interval over the run (link state and speed
    /// at its ends, bytes; no per-process split).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nics: Option<Vec<wattio_devices::NicEnergyRow>>,
}

/// The kernel's I/O work done for a command in a window, and its energy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelIoShare {
    /// CPU-seconds by kind of work (`writeback`, `block completion`, `network receive`, …).
    pub cpu_s_by_kind: std::collections::BTreeMap<String, f64>,
    /// Their sum, less the interrupt time already in the command's own CPU time.
    pub cpu_s: f64,
    /// The window's energy's CPU-time share for `cpu_s` (`attribution::share_j`).
    pub attributed_j: f64,
    /// The total's label, then `attributed (kernel I/O work: …)`.
    pub attributed_label: String,
}

impl KernelIoShare {
    /// The work between two readings of the watched counters, in a window of `total_j` joules
    /// (labelled `total_label`) over `duration_s` on `n_cpus` CPUs.
    pub fn new(
        (before, after): (&kernel_io::Watched, &kernel_io::Watched),
        total_j: f64,
        duration_s: f64,
        total_label: &str,
        n_cpus: usize,
    ) -> KernelIoShare {
        let (by_kind, cpu_s) = before.between(after);
        KernelIoShare {
            cpu_s_by_kind: by_kind
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            cpu_s,
            attributed_j: attribution::share_j(total_j, n_cpus, duration_s, cpu_s),
            attributed_label: format!("{total_label}, {}", kernel_io::LABEL),
        }
    }
}

/// The CO₂e of a run's energy figures at one carbon intensity: `co2e_g` of `total_j`,
/// `attributed_co2e_g` of `attributed_j`, `gpu_co2e_g` of `gpu_j`. Estimated wherever the
/// energy is, and always an estimate of the emissions (a yearly average intensity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCo2e {
    pub co2e_g: f64,
    pub attributed_co2e_g: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_co2e_g: Option<f64>,
    /// Of `gpu_attributed_j`, the command's share of the GPUs' energy.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu_attributed_co2e_g: Option<f64>,
    pub carbon_intensity: wattio_energy::CarbonIntensity,
}

impl wattio_energy::Co2eFigures for RunReport {
    /// The machine's energy over the run, the command's share, and the GPUs' and the command's
    /// share of them where GPUs are read.
    fn co2e_slots(
        &mut self,
        intensity: &wattio_energy::CarbonIntensity,
        each: &mut dyn FnMut(wattio_energy::Co2eSlot<'_>),
    ) {
        let c = self.co2e.insert(RunCo2e {
            co2e_g: 0.0,
            attributed_co2e_g: 0.0,
            gpu_co2e_g: None,
            gpu_attributed_co2e_g: None,
            carbon_intensity: intensity.clone(),
        });
        each(wattio_energy::Co2eSlot {
            joules: self.energy.total_j,
            grams: &mut c.co2e_g,
        });
        each(wattio_energy::Co2eSlot {
            joules: self.attributed_j,
            grams: &mut c.attributed_co2e_g,
        });
        wattio_energy::optional_co2e_slot(self.energy.gpu_j, &mut c.gpu_co2e_g, each);
        wattio_energy::optional_co2e_slot(
            self.gpu_attributed_j,
            &mut c.gpu_attributed_co2e_g,
            each,
        );
    }
}

/// The document `wattio measure --json` writes for a single run of one command: the run's
/// report with the command beside it (as argv; `sh -c …` for a shell command).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SingleRun {
    #[serde(flatten)]
    pub report: RunReport,
    pub command: Vec<String>,
}

impl RunReport {
    /// A run's report: the machine's energy over the run, how it ended, and the CPU time of the
    /// command; `attributed_j` is its CPU-time share on `n_cpus` CPUs.
    pub fn new(energy: EnergyReport, exit: Exit, child_cpu_s: f64, n_cpus: usize) -> RunReport {
        let total_label = energy.provenance_label();
        let attributed_j =
            attribution::share_j(energy.total_j, n_cpus, energy.duration_s, child_cpu_s);
        RunReport {
            attributed_label: attribution::attributed_label(&total_label),
            total_label,
            mean_power_w: energy.mean_power_w(),
            child_cpu_s,
            n_cpus,
            attributed_j,
            exit_code: exit.code,
            signal: exit.signal,
            energy,
            co2e: None,
            gpu_attributed_j: None,
            gpu_attributed_label: None,
            sync: None,
            kernel_io: None,
            regions: None,
            machine: None,
            disks: None,
            nics: None,
        }
    }

    pub fn exit(&self) -> Exit {
        Exit {
            code: self.exit_code,
            signal: self.signal,
        }
    }

    pub fn status(&self) -> RunStatus {
        self.exit().status()
    }
}

/// Errors of measuring.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("no command given: `wattio measure -- prog args…` for one command, or `wattio measure 'cmd A' 'cmd B'` to compare shell commands")]
    NoCommand,
    #[error(
        "--runs must be at least 1: give the number of measured runs per command, e.g. --runs 10"
    )]
    NoRuns,
    #[error("cannot run {cmd:?}: {err}; check the command name and PATH")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("waiting for the command failed: {0}")]
    Wait(std::io::Error),
    #[error(
        "measuring the sync after the command: {0}; pass --no-sync to leave the writeback out"
    )]
    Sync(std::io::Error),
    /// The kernel I/O program: its message names the fix (root, or WATTIO_KERNEL_IO=off).
    #[error("{0}")]
    KernelIo(std::io::Error),
    #[error("listing the block devices for their energy: {0}; check that /sys is mounted")]
    Disks(wattio_devices::DeviceError),
    #[error("cannot open the region socket in the temporary directory: {0}; set TMPDIR to a writable directory")]
    Regions(std::io::Error),
    // Not `#[from]`: that would make the energy error this one's source too, and an error
    // chain (`{:#}`) would print it twice.
    #[error("reading energy: {0}")]
    Energy(wattio_energy::EnergyError),
    #[error("command '{command}' failed in {phase} {run} of {of} with exit code {code}{hint}: fix it (--show-output shows its output), or pass --ignore-failure to leave failed runs out of the statistics", hint = code_hint(*code))]
    Failed {
        command: String,
        /// `run` or `warmup run`.
        phase: &'static str,
        run: usize,
        of: usize,
        code: i32,
    },
    #[error("the --prepare command '{command}' failed with exit code {code}{hint} before a run of '{before}': fix it so that it exits 0", hint = code_hint(*code))]
    PrepareFailed {
        command: String,
        before: String,
        code: i32,
    },
}

impl From<wattio_energy::EnergyError> for MeasureError {
    fn from(e: wattio_energy::EnergyError) -> Self {
        MeasureError::Energy(e)
    }
}

fn code_hint(code: i32) -> &'static str {
    match code {
        127 => " (the shell found no such command)",
        126 => " (not executable)",
        _ => "",
    }
}

/// Runs commands. The benchmark loop ([`bench::run_benchmark`]) only talks to this, so its
/// scheduling, exclusions and statistics are tested with fakes.
pub trait Executor {
    /// Runs `cmd` once, measured.
    fn run(&mut self, cmd: &CommandSpec) -> Result<RunReport, MeasureError>;

    /// Runs `cmd` once without measuring it (warmups, `--prepare`).
    fn run_unmeasured(&mut self, cmd: &CommandSpec) -> Result<Exit, MeasureError> {
        self.run(cmd).map(|r| r.exit())
    }
}

/// The real executor: spawns the command, reaps it with `wait4` for its CPU time, and reads the
/// meter right before the spawn and right after the exit.
pub struct MeterExecutor<'m> {
    meter: &'m Meter,
    n_cpus: usize,
    inherit_io: bool,
    /// The GPUs the meter reads (NVML indices): their energy is split by who used them.
    gpu_indices: Vec<u32>,
    /// Where to read `/proc/meminfo` and `/proc/stat` for the sync phase; `None`: no sync.
    sync_root: Option<SysRoot>,
    /// The kernel I/O program, watching each command's processes.
    kernel_io: Option<kernel_io::KernelIo>,
    /// Where to read the CPU time of the processes that open regions; `None`: no region socket.
    regions_root: Option<SysRoot>,
    /// The disks, metered over each run.
    storage: Option<wattio_devices::StorageWatch>,
    /// Where the network interfaces are read, over each run.
    nics_root: Option<SysRoot>,
}

impl<'m> MeterExecutor<'m> {
    /// `inherit_io`: the commands read and write wattio's stdin, stdout and stderr; otherwise
    /// they get `/dev/null` (hyperfine's default, so that output does not mix with reports).
    pub fn new(meter: &'m Meter, n_cpus: usize, inherit_io: bool) -> Self {
        MeterExecutor {
            meter,
            n_cpus,
            inherit_io,
            gpu_indices: meter.nvml_gpus(),
            sync_root: None,
            kernel_io: None,
            regions_root: None,
            storage: None,
            nics_root: None,
        }
    }

    /// Gives each run the disks' and NICs' energy intervals ([`RunReport::disks`],
    /// [`RunReport::nics`]), reading the devices under `root`; none where there are none.
    pub fn with_disks(mut self, root: &SysRoot) -> Result<Self, MeasureError> {
        self.storage = crate::disks::open_storage_watch(root).map_err(MeasureError::Disks)?;
        self.nics_root = Some(root.clone());
        Ok(self)
    }

    /// Serves each run a region socket ([`regions`]) on which the command measures regions of
    /// its own code, reading their CPU time under `root`.
    pub fn with_regions(mut self, root: SysRoot) -> Self {
        self.regions_root = Some(root);
        self
    }

    /// Charges each command the kernel's I/O work done for it ([`KernelIoShare`]), where the
    /// kernel I/O program loads (`mode` as `WATTIO_KERNEL_IO`).
    pub fn with_kernel_io(mut self, root: &SysRoot, mode: &str) -> Result<Self, MeasureError> {
        self.kernel_io =
            kernel_io::KernelIo::open(mode, root, None).map_err(MeasureError::KernelIo)?;
        Ok(self)
    }

    /// After each run whose command dirtied data, syncs and measures that as the run's sync
    /// phase ([`sync`]), reading `/proc` under `root`.
    pub fn syncing(mut self, root: SysRoot) -> Self {
        self.sync_root = Some(root);
        self
    }

    /// The sync phase after a run that ended at `after`, whose command dirtied `written_bytes`.
    fn sync_phase(
        &self,
        root: &SysRoot,
        after: &crate::meter::Snapshot,
        written_bytes: u64,
    ) -> Result<sync::SyncPhase, MeasureError> {
        let start = sync::SyncStart::read(root).map_err(MeasureError::Sync)?;
        sync::sync_all();
        let end = self.meter.snapshot()?;
        let busy = cputime::machine_busy_cpu_s(root).map_err(MeasureError::Sync)?;
        Ok(sync::SyncPhase::new(
            &self.meter.between(after, &end),
            (busy - start.busy_cpu_s).max(0.0),
            self.n_cpus,
            written_bytes,
            start.dirty_bytes,
        ))
    }

    fn spawn(
        &self,
        cmd: &CommandSpec,
        region_socket: Option<&std::path::Path>,
    ) -> Result<std::process::Child, MeasureError> {
        let mut c = cmd.command().ok_or(MeasureError::NoCommand)?;
        if let Some(path) = region_socket {
            c.env(regions::REGION_SOCKET_ENV, path);
        }
        if !self.inherit_io {
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
        c.spawn().map_err(|err| MeasureError::Spawn {
            cmd: cmd.program(),
            err,
        })
    }
}

impl Executor for MeterExecutor<'_> {
    fn run(&mut self, cmd: &CommandSpec) -> Result<RunReport, MeasureError> {
        let Some(root) = &self.regions_root else {
            return self.measured_run(cmd, None);
        };
        // Without a socket the command still runs, measured; the report says why it had none.
        let opened = regions::RegionServer::bind(self.meter, root.clone(), self.n_cpus)
            .and_then(|s| wattio_progress::Cancel::new().map(|stop| (s, stop)));
        let (server, stop) = match opened {
            Ok(o) => o,
            Err(e) => {
                let mut r = self.measured_run(cmd, None)?;
                r.regions = Some(regions::Regions {
                    unavailable: Some(MeasureError::Regions(e).to_string()),
                    ..regions::Regions::default()
                });
                return Ok(r);
            }
        };
        let mut report = std::thread::scope(|scope| {
            scope.spawn(|| server.serve(scope, &stop));
            // Set when this closure ends, by a return or a panic: the server must stop for the
            // scope to end.
            let _stop_serving = StopOnDrop(&stop);
            self.measured_run(cmd, Some(&server.path()))
        })?;
        report.regions = server.finish();
        Ok(report)
    }

    fn run_unmeasured(&mut self, cmd: &CommandSpec) -> Result<Exit, MeasureError> {
        let mut child = self.spawn(cmd, None)?;
        let status = child.wait().map_err(MeasureError::Wait)?;
        Ok(Exit::from_status(&status))
    }
}

/// Sets a cancel flag when dropped.
struct StopOnDrop<'a>(&'a wattio_progress::Cancel);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set();
    }
}

impl MeterExecutor<'_> {
    /// One measured run of `cmd`, handed `region_socket` in its environment.
    fn measured_run(
        &self,
        cmd: &CommandSpec,
        region_socket: Option<&std::path::Path>,
    ) -> Result<RunReport, MeasureError> {
        let gpu_reader = gpu_share::GpuShareWatcher::open(&self.gpu_indices);
        let kio = self.kernel_io.as_ref();
        let kio_before = kio.map(|k| k.watched());
        let disks_before = self.storage.as_ref().map(|w| w.mark());
        let nics_before = self.nics_root.as_ref().map(wattio_devices::NicMark::read);
        let before = self.meter.snapshot()?;
        // Watched from its fork on: this process is watched across the spawn only.
        let me = std::process::id();
        if let Some(k) = kio {
            k.watch(me).map_err(MeasureError::KernelIo)?;
        }
        let spawned = self.spawn(cmd, region_socket);
        if let Some(k) = kio {
            k.unwatch(me);
        }
        let child = spawned?;
        let watcher = gpu_reader.map(|r| gpu_share::GpuShareWatcher::start(r, child.id()));
        let usage = cputime::wait_child(child).map_err(MeasureError::Wait)?;
        let after = self.meter.snapshot()?;
        let disks = self
            .storage
            .as_ref()
            .zip(disks_before)
            .map(|(w, b)| w.rows_between(&b, &w.mark()));
        let nics = self.nics_root.as_ref().zip(nics_before).map(|(root, b)| {
            wattio_devices::nic_rows_between(&b, &wattio_devices::NicMark::read(root))
        });
        let kio_after = kio.map(|k| k.watched());
        // A platform meter's readings of the run's end arrive late: waited for, at most 2 min.
        let aligned =
            self.meter
                .between_aligned(&before, &after, std::time::Duration::from_secs(120));
        let machine = aligned.machine_view();
        let energy = aligned.report;
        let kernel_io = kio_before.zip(kio_after).map(|(b, a)| {
            let label = energy.provenance_label();
            let (j, s) = (energy.total_j, energy.duration_s);
            KernelIoShare::new((&b, &a), j, s, &label, self.n_cpus)
        });
        let share = watcher.and_then(|w| w.finish(&energy));
        let mut r = RunReport::new(
            energy,
            Exit::from_status(&usage.status),
            usage.cpu_s,
            self.n_cpus,
        );
        if let Some(s) = share {
            r.gpu_attributed_j = Some(s.energy_j);
            r.gpu_attributed_label = Some(s.label);
        }
        r.kernel_io = kernel_io;
        r.machine = machine;
        r.disks = disks;
        r.nics = nics;
        if let Some(root) = &self.sync_root {
            if usage.written_bytes > 0 {
                let mut phase = self.sync_phase(root, &after, usage.written_bytes)?;
                if let Some((k, b)) = kio.zip(kio_after) {
                    // The writeback and completions done for the command during the sync,
                    // measured, in place of the dirty-data share.
                    let (j, s) = (phase.total_j, phase.duration_s);
                    let label = phase.total_label.clone();
                    let w = (&b, &k.watched());
                    phase.charge_measured(&KernelIoShare::new(w, j, s, &label, self.n_cpus));
                }
                r.sync = Some(phase);
            }
        }
        Ok(r)
    }
}

/// Online CPUs under `root` (the `n` of the split).
pub fn online_cpus(root: &SysRoot) -> Result<usize, MeasureError> {
    Ok(wattio_energy::online_cpu_count(root)?.max(1))
}

/// Runs `argv` once under `meter`, with the terminal passed through.
pub fn measure_once(
    meter: &Meter,
    n_cpus: usize,
    argv: &[OsString],
) -> Result<RunReport, MeasureError> {
    if argv.is_empty() {
        return Err(MeasureError::NoCommand);
    }
    MeterExecutor::new(meter, n_cpus, true).run(&CommandSpec::Argv(argv.to_vec()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::meter::DomainEnergy;
    use wattio_energy::{Domain, Provenance};

    /// An estimated report of `total_j` over `duration_s`, as the model would give.
    pub(crate) fn energy(total_j: f64, duration_s: f64) -> EnergyReport {
        EnergyReport {
            duration_s,
            provenance: Provenance::estimated("ccf-linear(min=0.74W,max=3.5W per vCPU)"),
            domains: vec![DomainEnergy {
                socket: 0,
                domain: Domain::Package,
                energy_j: total_j,
                label: None,
            }],
            total_j,
            psys_j: None,
            gpu_j: None,
            gpu_label: None,
            read_errors: vec![],
        }
    }

    #[test]
    fn command_energy_is_the_cpu_time_share_and_never_exceeds_the_total() {
        // 2 CPUs for 1 s = 2 CPU-s of capacity; the command used 0.5 CPU-s: a quarter of 10 J.
        let r = RunReport::new(energy(10.0, 1.0), Exit::code(0), 0.5, 2);
        assert_eq!(r.attributed_j, 2.5);
        assert_eq!(r.mean_power_w, 10.0);
        assert_eq!(r.status(), RunStatus::Ok);
        // A tiny window whose rusage says more CPU than the window held: capped at the total
        // (the old `CPU s × W_max` gave 3 × 3.5 = 10.5 J here, over 30 times the total).
        let r = RunReport::new(energy(0.3, 0.01), Exit::code(0), 3.0, 2);
        assert_eq!(r.attributed_j, 0.3);
        assert!(r.total_label.starts_with("estimated (model: ccf-linear("));
        assert!(r
            .attributed_label
            .ends_with("), attributed (cpu-time share)"));
    }

    #[test]
    fn results_written_with_the_old_share_names_still_read() {
        let r = RunReport::new(energy(10.0, 1.0), Exit::code(0), 0.5, 2);
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""attributed_j":2.5"#), "{json}");
        let old = json
            .replace(r#""attributed_j""#, r#""command_j""#)
            .replace(r#""attributed_label""#, r#""command_label""#);
        assert!(!old.contains("attributed_j"));
        let back: RunReport = serde_json::from_str(&old).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn exits_are_classified() {
        assert_eq!(Exit::code(3).status(), RunStatus::Failed);
        assert_eq!(Exit::signal(9).status(), RunStatus::Interrupted);
        assert_eq!(Exit::signal(9).code, 137);
        assert!(Exit::code(0).success());
    }

    #[test]
    fn argv_is_displayed_as_a_shell_would_read_it() {
        let c = CommandSpec::Argv(vec!["sh".into(), "-c".into(), "exit 3".into()]);
        assert_eq!(c.display(), "sh -c 'exit 3'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(CommandSpec::Shell("true".into()).display(), "true");
        assert!(CommandSpec::Argv(vec![]).command().is_none());
    }

    #[test]
    fn the_real_executor_measures_a_shell_command() {
        let cfg = crate::MeterConfig {
            root: SysRoot::new("/"),
            choice: wattio_energy::SourceChoice::Only(wattio_energy::Mechanism::Model),
            ..Default::default()
        };
        let meter = Meter::open(&cfg).unwrap();
        let n = online_cpus(&cfg.root).unwrap();
        let mut ex = MeterExecutor::new(&meter, n, false);
        let busy =
            CommandSpec::Shell("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 4".into());
        let r = ex.run(&busy).unwrap();
        assert_eq!(r.exit_code, 4);
        assert_eq!(r.status(), RunStatus::Failed);
        assert!(r.child_cpu_s > 0.0);
        assert!(r.attributed_j > 0.0 && r.attributed_j <= r.energy.total_j);
        assert_eq!(ex.run_unmeasured(&busy).unwrap(), Exit::code(4));
        let e = ex
            .run(&CommandSpec::Argv(vec!["/nonexistent/cmd".into()]))
            .unwrap_err();
        assert!(
            e.to_string().contains("cannot run \"/nonexistent/cmd\""),
            "{e}"
        );
    }
}
