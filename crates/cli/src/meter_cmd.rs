//! `wattio probe | record | export | workload`: argument parsing and printing over
//! `wattio-energy` and `wattio-meter` (`measure` is in `measure_cmd.rs`).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use wattio_energy::attribution::{By, IdlePolicy};
use wattio_energy::{Domain, ModelChoice, ModelParams, SourceChoice, SysRoot};
use wattio_meter::{record_rows, Meter, MeterConfig, RecordFormat, RecordProgress, SamplerConfig};
use wattio_progress::Sink;
use wattio_units::{format_duration, parse_duration_bare, parse_duration_or_seconds, BareUnit};

/// Options that choose and configure the energy source; shared by every command that meters.
/// Where the carbon intensity of CO₂e figures comes from.
#[derive(Args, Debug, Clone)]
pub struct CarbonArgs {
    /// Grams of CO2e per kWh of the electricity used: adds CO2e beside the energy figures
    #[arg(long, value_name = "G_PER_KWH", conflicts_with = "region")]
    carbon_intensity: Option<String>,
    /// Country whose yearly carbon intensity to use, ISO 3166-1 alpha-3 (FRA, USA, DEU, …),
    /// from wattio's table (Our World in Data via CodeCarbon): adds CO2e beside the energy
    #[arg(long, value_name = "ISO3")]
    region: Option<String>,
}

impl CarbonArgs {
    /// The CO₂e transform asked for, if any: the one every command's outputs take their CO₂e
    /// from.
    pub fn co2e(&self) -> Result<Option<wattio_energy::Co2e>> {
        let intensity = match (&self.carbon_intensity, &self.region) {
            (Some(g), _) => wattio_energy::CarbonIntensity::given(g)?,
            (None, Some(r)) => wattio_energy::CarbonIntensity::for_region(r)?,
            (None, None) => return Ok(None),
        };
        Ok(Some(wattio_energy::Co2e::new(intensity)))
    }
}

#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    /// Mechanism: auto (perf, then powercap, then msr, then the model), perf, ebpf (perf's
    /// counters read by a BPF program on a kernel timer; only on request), powercap, msr or model;
    /// nvml reads GPUs alone (GPUs come with any CPU mechanism through --domains gpu).
    #[arg(long, default_value = "auto", value_parser = parse_choice)]
    pub source: SourceChoice,
    /// Only these domains, comma-separated: package, core, uncore, dram, psys, gpu (NVIDIA GPUs
    /// through NVML; without --domains they are read whenever NVML is usable).
    #[arg(long, value_delimiter = ',', value_parser = parse_domain)]
    pub domains: Option<Vec<Domain>>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub platform: PlatformArgs,
}

/// Platform meters reached over the network, read beside the CPU.
#[derive(Args, Debug, Clone, Default)]
pub struct PlatformArgs {
    /// A BMC to read the whole machine's power or energy from, over Redfish:
    /// redfish://HOST[:PORT][/CHASSIS] (HTTPS, certificate checked; WATTIO_REDFISH_CACERT names
    /// a CA file) or redfish+http://HOST (plain HTTP). Repeatable or comma-separated.
    /// Credentials: a file named by WATTIO_REDFISH_CREDENTIALS (user:password), or
    /// WATTIO_REDFISH_USER and WATTIO_REDFISH_PASSWORD; never on the command line.
    #[arg(long = "platform", value_name = "URL", value_delimiter = ',', value_parser = parse_platform)]
    pub platforms: Vec<wattio_energy::PlatformUrl>,
}

fn parse_platform(s: &str) -> Result<wattio_energy::PlatformUrl, String> {
    s.parse()
}

/// Which model estimates where no counter exists.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Model for estimates: auto (tdp-curve when this CPU and its threads are known, else
    /// ccf-linear with the CPU's microarchitecture coefficients, else CCF's averages),
    /// ccf-linear (CCF's averages), ccf-arch, tdp-curve, or a model FILE from `wattio calibrate`.
    #[arg(long, default_value = "auto", value_name = "auto|ccf-linear|ccf-arch|tdp-curve|FILE", value_parser = parse_model)]
    pub model: ModelChoice,
    /// ccf-linear: watts per vCPU when idle (default 0.74; implies --model ccf-linear).
    #[arg(long)]
    pub model_min_w: Option<f64>,
    /// ccf-linear: watts per vCPU when fully busy (default 3.5; implies --model ccf-linear).
    #[arg(long)]
    pub model_max_w: Option<f64>,
}

fn parse_model(s: &str) -> Result<ModelChoice, String> {
    s.parse()
}

impl ModelArgs {
    /// The model these options name on the machine under `root`.
    pub fn resolve(&self, root: &SysRoot) -> Result<ModelParams> {
        let ccf = match (self.model_min_w, self.model_max_w) {
            (None, None) => None,
            (min, max) => Some((
                min.unwrap_or(wattio_energy::CCF_MIN_W),
                max.unwrap_or(wattio_energy::CCF_MAX_W),
            )),
        };
        Ok(self.model.resolve(root, ccf)?)
    }
}

fn parse_choice(s: &str) -> Result<SourceChoice, String> {
    s.parse()
}

fn parse_domain(s: &str) -> Result<Domain, String> {
    s.parse()
}

impl SourceArgs {
    /// The meter configuration these options describe (root from `WATTIO_ROOT`); fails on a
    /// model that cannot be had (a bad model file, tdp-curve where the CPU is unknown).
    pub fn config(&self) -> Result<MeterConfig> {
        let root = SysRoot::from_env();
        let model = self.model.resolve(&root)?;
        Ok(MeterConfig {
            root,
            choice: self.source,
            domains: self.domains.clone(),
            model,
            platforms: self.platform.platforms.clone(),
        })
    }

    /// Opens the meter, printing on stderr which mechanisms were passed over and why.
    pub fn open_meter(&self) -> Result<Meter> {
        let cfg = self.config()?;
        let meter = Meter::open(&cfg)?;
        warn_provenance(&meter);
        Ok(meter)
    }
}

fn warn_provenance(meter: &Meter) {
    let p = meter.provenance();
    if p.estimated {
        let why: Vec<&str> = meter.passed_over().iter().map(String::as_str).collect();
        crate::say::note(format_args!(
            "no hardware energy counter usable{}; figures are ESTIMATED by {} (`wattio probe` says how to fix)",
            if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) },
            p.model.as_deref().unwrap_or("a model")
        ));
    }
}

#[derive(Args)]
pub struct RecordArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    carbon: CarbonArgs,
    /// Samples per second (0.001 to 1000).
    #[arg(long, default_value_t = 10.0)]
    freq: f64,
    /// Stop after this long, e.g. 500ms, 60s or 1h (a plain number is seconds; default: until
    /// Ctrl-C or SIGTERM).
    #[arg(long, value_parser = parse_duration_or_seconds)]
    duration: Option<Duration>,
    /// Output file (default: standard output).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// csv or jsonl.
    #[arg(long, default_value = "csv", value_parser = parse_format)]
    format: RecordFormat,
    #[command(flatten)]
    attribution: AttributionArgs,
    /// Time between attribution rows (with --by), e.g. 500ms or 1s (a plain number is seconds).
    #[arg(long, default_value = "1s", value_parser = parse_duration_or_seconds, requires = "by")]
    by_interval: Duration,
    /// With --by: rows for the N entries with the most energy in each interval; the rest in one
    /// `other` row.
    #[arg(long, default_value_t = 10, requires = "by")]
    top: usize,
}

/// Per-process or per-cgroup attribution options of `record` and `export`.
#[derive(Args, Debug, Clone)]
pub struct AttributionArgs {
    /// Also attribute the energy by CPU-time share to each process, cgroup, virtual machine
    /// (`vm`: libvirt domains, Proxmox VMs, plain QEMU processes), container (`container`:
    /// named through docker's or podman's API socket, or the Kubernetes API in a pod) or
    /// Kubernetes pod (`pod`).
    #[arg(long, value_parser = |s: &str| s.parse::<By>())]
    pub by: Option<By>,
    /// Where the energy nobody's CPU time explains goes: apart (an idle/unattributed figure,
    /// as Scaphandre and Kepler do) or shared (split over the entries by CPU time).
    #[arg(long, default_value = "apart", value_parser = |s: &str| s.parse::<IdlePolicy>(), requires = "by")]
    pub idle: IdlePolicy,
}

fn parse_format(s: &str) -> Result<RecordFormat, String> {
    s.parse()
}

pub fn record(a: RecordArgs) -> Result<ExitCode> {
    if a.duration == Some(Duration::ZERO) {
        bail!("--duration must be more than 0, e.g. 500ms or 60s");
    }
    // Checked before anything opens, with the sampler's own bounds and message.
    wattio_meter::check_freq(a.freq)?;
    let co2e = a.carbon.co2e()?;
    let cfg = a.source.config()?;
    let (source, passed_over) = cfg.open_with_gpus()?;
    if source.provenance().estimated {
        crate::say::note(format_args!(
            "no hardware energy counter usable{}; {}rows are ESTIMATED by {} (estimated=true; `wattio probe` says how to fix)",
            if passed_over.is_empty() { String::new() } else { format!(" ({})", passed_over.join("; ")) },
            if source.counters().iter().any(|c| c.domain == Domain::Gpu) { "CPU " } else { "" },
            source.provenance().model.as_deref().unwrap_or("a model")
        ));
    }
    let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let samples = Arc::clone(&progress);
    let scfg = SamplerConfig {
        freq_hz: a.freq,
        duration: a.duration,
        progress: Sink::new(move |p: &RecordProgress| {
            samples.store(p.samples, std::sync::atomic::Ordering::Relaxed)
        }),
        ..SamplerConfig::default()
    };
    let attribution = record_attribution(&a, source.as_ref())?;
    // Ctrl-C or SIGTERM ends the recording: the last row is written and the file flushed.
    let cancel = crate::study_ui::cancel_on_signals()?;
    // Rows going to a file: show progress on a terminal (indicatif hides itself otherwise).
    let _bar = a
        .output
        .as_ref()
        .map(|_| ProgressLine::start(progress, a.duration));
    let counters = source.counters().to_vec();
    let recorded = wattio_meter::RecordedCounters::of(source.as_ref());
    let estimated: Vec<bool> = (0..counters.len())
        .map(|i| source.counter_provenance(i).estimated)
        .collect();
    let stats = match &a.output {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| {
                format!(
                    "cannot create {}: check the directory exists and is writable",
                    p.display()
                )
            })?;
            record_rows(source, &scfg, &cancel, a.format, f, attribution)?
        }
        // A closed pipe (`| head`) comes back as an error that `main` ends quietly.
        None => record_rows(
            source,
            &scfg,
            &cancel,
            a.format,
            std::io::stdout(),
            attribution,
        )?,
    };
    crate::say::note(stats.summary());
    if let Some(co2e) = &co2e {
        crate::say::note(format_args!("CO2e at {}:", co2e.label()));
        for line in stats.co2e_lines(&counters, &estimated, co2e) {
            crate::say::note_detail(line);
        }
    }
    if let Some(m) = recorded.machine_view(&stats.energy_j, stats.wall_s) {
        for line in m.watt_lines("over the recording") {
            crate::say::note(line);
        }
    }
    for w in stats.repeat_warnings(&counters) {
        crate::say::warn(w);
    }
    Ok(ExitCode::SUCCESS)
}

/// `record --by`'s attribution, with the GPUs NVML can say who used; `None` without `--by`.
fn record_attribution(
    a: &RecordArgs,
    source: &dyn wattio_energy::Source,
) -> Result<Option<wattio_meter::RecordAttribution>> {
    Ok(match a.attribution.by {
        Some(by) => {
            if a.by_interval < Duration::from_millis(50) {
                bail!(
                    "--by-interval must be at least 50ms (got {})",
                    format_duration(a.by_interval)
                );
            }
            let root = SysRoot::from_env();
            let n_cpus = wattio_energy::online_cpu_count(&root)?;
            Some(
                wattio_meter::RecordAttribution::new(
                    root,
                    by,
                    a.attribution.idle,
                    n_cpus,
                    source.counters(),
                    a.by_interval,
                    a.top,
                )
                .context("starting attribution")?
                .on_warning(wattio_progress::Sink::new(|w: &str| crate::say::warn(w))),
            )
            .inspect(|a| {
                if let Some(note) = a.naming_note() {
                    crate::say::warn(&note);
                }
            })
            .map(|a| {
                let gpus: Vec<(u32, String)> = source
                    .counters()
                    .iter()
                    .enumerate()
                    // NVML's GPUs: the ones it can say who used.
                    .filter(|(i, c)| {
                        c.domain == Domain::Gpu
                            && source.counter_provenance(*i).mechanism
                                == wattio_energy::Mechanism::Nvml
                    })
                    .map(|(i, c)| (c.socket, source.counter_provenance(i).label()))
                    .collect();
                a.with_gpus(&gpus).unwrap_or_else(|(a, why)| {
                    crate::say::warn(why);
                    a
                })
            })
        }
        None => None,
    })
}

/// A spinner on stderr with elapsed time and samples written, updated twice a second.
struct ProgressLine {
    bar: indicatif::ProgressBar,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressLine {
    fn start(samples: Arc<std::sync::atomic::AtomicU64>, duration: Option<Duration>) -> Self {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} recording {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        let done = Arc::new(AtomicBool::new(false));
        let (b, d) = (bar.clone(), Arc::clone(&done));
        let thread = std::thread::spawn(move || {
            use std::sync::atomic::Ordering;
            while !d.load(Ordering::Relaxed) {
                let n = samples.load(Ordering::Relaxed);
                let of = duration
                    .map(|d| format!(" of {}", format_duration(d)))
                    .unwrap_or_default();
                b.set_message(format!("{n} samples{of} (Ctrl-C to stop)"));
                b.tick();
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        ProgressLine {
            bar,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

#[derive(Args)]
pub struct ExportArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9464")]
    listen: String,
    #[command(flatten)]
    attribution: AttributionArgs,
    #[command(flatten)]
    carbon: CarbonArgs,
    /// With --by: at most this many per-process or per-cgroup series; the energy of the
    /// others goes to one `other` series (keeps Prometheus's cardinality bounded). The disks'
    /// split between cgroups or processes is bounded by the default (50) whatever --by says.
    #[arg(long, default_value_t = 50, requires = "by")]
    max_series: usize,
    /// The sampling clock: the counters are read and attributed once per interval, whoever
    /// scrapes and how often (Kepler's default is also 5s), e.g. 1s or 500ms.
    #[arg(long, default_value = "5s", value_parser = parse_duration_or_seconds)]
    interval: Duration,
    /// A Prometheus web-config file (YAML): `tls_server_config` for HTTPS,
    /// `basic_auth_users` (bcrypt hashes) for authentication, `http_server_config.headers`.
    #[arg(long, value_name = "FILE")]
    web_config: Option<PathBuf>,
    /// A file holding a bearer token scrapers must send (`Authorization: Bearer …`), beside or
    /// instead of the web config's users.
    #[arg(long, value_name = "FILE")]
    bearer_token_file: Option<PathBuf>,
}

pub fn export(a: ExportArgs) -> Result<ExitCode> {
    if !(Duration::from_millis(50)..=Duration::from_secs(3600)).contains(&a.interval) {
        bail!(
            "--interval must be between 50ms and 1h (got {})",
            format_duration(a.interval)
        );
    }
    let web = match &a.web_config {
        Some(p) => Some(wattio_meter::WebConfig::load(p)?),
        None => None,
    };
    let bearer = match &a.bearer_token_file {
        Some(p) => Some(wattio_meter::BearerToken::load(p)?),
        None => None,
    };
    let co2e = a.carbon.co2e()?;
    let meter = a.source.open_meter()?;
    let listener = std::net::TcpListener::bind(&a.listen).with_context(|| {
        format!(
            "cannot listen on {}: pick a free address with --listen HOST:PORT",
            a.listen
        )
    })?;
    let addr = listener.local_addr()?;
    let scheme = match web.as_ref().and_then(|w| w.tls.as_ref()) {
        Some(_) => "https",
        None => "http",
    };
    crate::say::note(format_args!(
        "metrics on {scheme}://{addr}/metrics ({}, sampled every {}){}; Ctrl-C to stop",
        meter.provenance().label(),
        format_duration(a.interval),
        match (
            web.as_ref().is_some_and(|w| w.users.is_some()),
            bearer.is_some()
        ) {
            (true, true) => ", basic or bearer authentication on",
            (true, false) => ", basic authentication on",
            (false, true) => ", bearer authentication on",
            (false, false) => "",
        }
    ));
    let live = match a.attribution.by {
        Some(by) => {
            let root = SysRoot::from_env();
            let n_cpus = wattio_energy::online_cpu_count(&root)?;
            let live =
                wattio_meter::LiveAttribution::start(&meter, root, by, a.attribution.idle, n_cpus)
                    .context("starting attribution")?;
            if let Some(note) = &live.gpu_note {
                crate::say::warn(note);
            }
            if let Some(note) = live.naming_note() {
                crate::say::warn(&note);
            }
            kernel_io_warning(live.kernel_io_off());
            Some((live, by))
        }
        None => None,
    };
    let mut exporter = wattio_meter::Exporter::new(meter);
    if let Some((live, by)) = live {
        exporter = exporter.with_attribution(live, by, a.max_series);
    }
    // Where the block devices cannot be listed the exporter still serves the rest.
    match wattio_meter::DeviceIntervals::open(&SysRoot::from_env()) {
        Ok(devices) => exporter = exporter.with_devices(devices, a.max_series),
        Err(e) => crate::say::warn(format!("no disk or NIC series: {e}")),
    }
    if let Some(co2e) = co2e {
        exporter = exporter.with_co2e(co2e);
    }
    let exporter = Arc::new(exporter);
    let cancel = crate::study_ui::cancel_on_signals()?;
    let opts = wattio_meter::ServeOptions {
        interval: a.interval,
        web,
        bearer,
    };
    wattio_meter::serve_metrics(listener, exporter, opts, &cancel)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct WorkloadArgs {
    #[command(subcommand)]
    kind: WorkloadKind,
}

#[derive(Subcommand)]
enum WorkloadKind {
    /// Write a file of deterministic data, fsync it, read it back verifying its checksum, remove it.
    FileIo {
        /// Size in MiB.
        #[arg(long, default_value_t = 256)]
        mib: u64,
        /// Directory for the temporary file (default: the system temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Keep one CPU busy for a given fraction of the time (duty cycle over 10 ms periods).
    Spin {
        /// Fraction of one CPU, 0 to 1.
        #[arg(long, default_value_t = 1.0)]
        load: f64,
        /// How long, e.g. 500ms, 5s or 1m (a plain number is seconds). `--seconds` is its old
        /// name.
        #[arg(long, alias = "seconds", default_value = "5s", value_parser = parse_duration_or_seconds)]
        duration: Duration,
    },
    /// Keep an NVIDIA GPU busy with a spin kernel handed to the CUDA driver as PTX (no CUDA
    /// toolkit needed: the driver's libcuda.so.1, or WATTIO_CUDA_LIB, is loaded at run time).
    Gpu {
        /// Percentage of each 100 ms period the GPU is kept busy, more than 0 and at most 100
        /// (as NVML sees it when this process is alone on the GPU: the driver time-slices two).
        #[arg(long, default_value_t = 100.0)]
        util: f64,
        /// How long, e.g. 500ms, 5s or 1m (a plain number is seconds).
        #[arg(long, alias = "seconds", default_value = "5s", value_parser = parse_duration_or_seconds)]
        duration: Duration,
        /// The CUDA device ordinal.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Print what it did as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

pub fn workload(a: WorkloadArgs) -> Result<ExitCode> {
    match a.kind {
        WorkloadKind::FileIo { mib, dir } => {
            let dir = dir.unwrap_or_else(std::env::temp_dir);
            let r = wattio_meter::file_io_workload(&dir, mib * 1024 * 1024)
                .with_context(|| format!("file-io workload in {}", dir.display()))?;
            let mb = r.bytes as f64 / 1e6;
            eprintln!(
                "workload file-io: wrote {mb:.1} MB in {:.3} s ({:.1} MB/s, fsync included), read back in {:.3} s ({:.1} MB/s), checksum {:#018x} verified",
                r.write_s,
                mb / r.write_s.max(1e-9),
                r.read_s,
                mb / r.read_s.max(1e-9),
                r.checksum
            );
            Ok(ExitCode::SUCCESS)
        }
        WorkloadKind::Spin { load, duration } => {
            if !(load.is_finite() && (0.0..=1.0).contains(&load)) {
                bail!("--load must be between 0 and 1 (got {load})");
            }
            if duration.is_zero() {
                bail!("--duration must be more than 0, e.g. 500ms or 5s");
            }
            let cpu = wattio_meter::spin_cpu(load, Duration::from_millis(10), duration);
            eprintln!(
                "workload spin: {cpu:.3} CPU-s in {} (load {load})",
                format_duration(duration)
            );
            Ok(ExitCode::SUCCESS)
        }
        WorkloadKind::Gpu {
            util,
            duration,
            device,
            json,
        } => {
            if duration.is_zero() {
                bail!("--duration must be more than 0, e.g. 500ms or 5s");
            }
            let r = wattio_meter::gpu_load(&wattio_meter::GpuLoadConfig {
                lib: wattio_meter::cuda_lib_from_env(),
                device,
                util: util / 100.0,
                duration,
            })?;
            eprintln!(
                "workload gpu: {} (device {}, {} SMs) busy {:.3} s of {:.3} s ({:.1} %, asked {util} %), {} launches of {} iterations",
                r.device_name,
                r.device,
                r.multiprocessors,
                r.busy_s,
                r.elapsed_s,
                100.0 * r.busy_fraction,
                r.launches,
                r.iters_per_launch
            );
            if json {
                println!("{}", serde_json::to_string(&r)?);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct FixtureArgs {
    #[command(subcommand)]
    action: Option<FixtureAction>,
    /// intel-server (two sockets, DRAM unit quirk), amd-epyc (per-core energy, SMT), intel-laptop (psys, mmio)
    /// or server-platform (intel-server with an ACPI power meter and a BMC that answers in 2 s).
    #[arg(required = true, value_parser = clap::builder::PossibleValuesParser::new(wattio_fixture::MACHINES))]
    machine: Option<String>,
    /// Directory to create the tree in (must not exist or be empty).
    #[arg(required = true)]
    dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum FixtureAction {
    /// Make a fixture's counters live: advance them at known watts, wrapping at their limit, until
    /// Ctrl-C, SIGTERM or --duration; log the true energy.
    Tick(TickArgs),
}

#[derive(Args)]
pub struct TickArgs {
    /// A tree written by `wattio fixture MACHINE DIR`.
    dir: PathBuf,
    /// Watts of each ticking counter (each package, with the default --domains).
    #[arg(long)]
    watts: f64,
    /// Time between two rewrites of the counters, 100us to 10s [default: 1ms] (a plain number
    /// is seconds).
    #[arg(long, value_parser = parse_duration_or_seconds)]
    interval: Option<Duration>,
    /// The old spelling of --interval, where a plain number is milliseconds.
    #[arg(long, hide = true, conflicts_with = "interval", value_parser = |s: &str| parse_duration_bare(s, BareUnit::Milliseconds))]
    interval_ms: Option<Duration>,
    /// Domains whose powercap zones tick (package also ticks the package energy MSR stand-ins);
    /// other counters stay still.
    #[arg(long, value_delimiter = ',', default_value = "package", value_parser = parse_domain)]
    domains: Vec<Domain>,
    /// Written into each ticking zone's max_energy_range_uj, where energy_uj wraps to 0; at most
    /// 9999999 so that each value is one 8-byte write that readers see whole (see
    /// --allow-torn-reads).
    #[arg(long, default_value_t = wattio_fixture::TICK_MAX_ENERGY_RANGE_UJ)]
    max_energy_range_uj: u64,
    /// Accept a longer --max-energy-range-uj (a real package zone's 262143328850): each value is
    /// then rewritten in one write of more than 8 bytes, which a concurrent reader can, rarely,
    /// see torn. For benchmarks of a reader's cost, not for checks of its energy figures.
    #[arg(long)]
    allow_torn_reads: bool,
    /// Energy status unit written into the RAPL unit MSR stand-ins: units of 2^-N J, so the 32-bit
    /// counter wraps after 2^(32-N) J (real CPUs: 14 or 16; 29 wraps every 8 J).
    #[arg(long, value_name = "N")]
    msr_esu: Option<u32>,
    /// Stop after this long, e.g. 500ms or 10s (a plain number is seconds; default: until Ctrl-C
    /// or SIGTERM).
    #[arg(long, value_parser = parse_duration_or_seconds)]
    duration: Option<Duration>,
    /// CSV of the true energy (unix_ns,elapsed_s,counter,energy_j,raw,wraps): at the start, at
    /// every wrap, once a second and at the end.
    #[arg(long)]
    log: Option<PathBuf>,
}

pub fn fixture(a: FixtureArgs) -> Result<ExitCode> {
    let (machine, dir) = match (a.action, a.machine, a.dir) {
        (Some(FixtureAction::Tick(t)), _, _) => return fixture_tick(t),
        (None, Some(m), Some(d)) => (m, d),
        _ => bail!("give a MACHINE and a DIR, or `wattio fixture tick DIR --watts W`"),
    };
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} exists and is not empty: give a new directory so nothing is overwritten",
            dir.display()
        );
    }
    wattio_fixture::build(&machine, &dir)
        .with_context(|| format!("writing the fixture into {}", dir.display()))?;
    let bmc = dir.join(wattio_fixture::FAKE_BMC_DIR).join("ipmitool");
    let env = if bmc.exists() {
        format!("{}={} ", wattio_energy::IPMITOOL_ENV, bmc.display())
    } else {
        String::new()
    };
    eprintln!(
        "wrote a {machine} fixture; try: {env}WATTIO_ROOT={} wattio probe, or make it live with `wattio fixture tick {} --watts 10`",
        dir.display(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn fixture_tick(a: TickArgs) -> Result<ExitCode> {
    use wattio_fixture::{FixtureTree, TickConfig, Ticker};
    crate::say::set_command("fixture tick");
    if !a.dir.join("sys").is_dir() && !a.dir.join("dev").is_dir() {
        bail!(
            "{} holds no fixture tree: write one first with `wattio fixture amd-epyc {}`",
            a.dir.display(),
            a.dir.display()
        );
    }
    let interval = a
        .interval
        .or(a.interval_ms)
        .unwrap_or(Duration::from_millis(1));
    if interval.is_zero() {
        bail!("--interval must be more than 0, e.g. 1ms");
    }
    if a.duration == Some(Duration::ZERO) {
        bail!("--duration must be more than 0, e.g. 500ms or 10s");
    }
    let cfg = TickConfig {
        watts: a.watts,
        interval,
        domains: a.domains,
        max_energy_range_uj: a.max_energy_range_uj,
        allow_torn_reads: a.allow_torn_reads,
        msr_esu: a.msr_esu,
        duration: a.duration,
    };
    let tree = FixtureTree::new(&a.dir)?;
    let ticker = Ticker::prepare(&tree, &cfg)?;
    let mut log = match &a.log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| {
                format!(
                    "cannot create {}: check the directory exists and is writable",
                    p.display()
                )
            })?,
        )),
        None => None,
    };
    for c in ticker.counters() {
        crate::say::note(format_args!("{} at {} W", c.name, a.watts));
    }
    let cancel = crate::study_ui::cancel_on_signals()?;
    let summary = ticker.run(&cancel, log.as_mut().map(|w| w as &mut dyn std::io::Write))?;
    if let Some(mut w) = log {
        std::io::Write::flush(&mut w)?;
    }
    for c in &summary.counters {
        crate::say::note(format_args!(
            "{}: {:.6} J in {:.3} s, {} wraps",
            c.name, c.energy_j, summary.seconds, c.wraps
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Says why the kernel's I/O work stays with the tasks that ran it, where the program was
/// wanted and did not load as root.
pub(crate) fn kernel_io_warning(why: Option<&str>) {
    if let Some(why) = why {
        crate::say::warn(format_args!(
            "the kernel's I/O work is not charged to its owners: {why} (WATTIO_KERNEL_IO=off silences this)"
        ));
    }
}
