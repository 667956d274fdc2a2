//! `hwmon`: the energy and power channels of Linux hardware-monitoring drivers.
//!
//! Kernel `Documentation/hwmon/sysfs-interface.rst`: `energyN_input` is cumulative energy in
//! microjoules, `powerN_input` instantaneous power and `powerN_average` average power in
//! microwatts, averaged over `powerN_average_interval` milliseconds. A device with energy
//! channels is read through them alone (its power channels may cover the same rails); otherwise
//! each power index through its average where it has one, else its instantaneous value. The
//! driver's `name` sets the scope: `power_meter` (the ACPI power meter,
//! `Documentation/hwmon/acpi_power_meter.rst`) measures the whole platform; every other driver's
//! channels are listed as devices, each on its own, never added to the CPU's total. Reads run
//! on the poller's thread ([`crate::PolledSource`]): some drivers evaluate an ACPI method or ask
//! firmware on each read.

use crate::error::EnergyError;
use crate::opening::{OpenRequest, Opened};
use crate::polled::{PolledSource, ReadingSource};
use crate::reading::{Channel, Reading, ReadingKind, ReadingValue};
use crate::root::SysRoot;
use crate::types::{Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The registry's name for this mechanism.
pub(crate) const MECHANISM: Mechanism = Mechanism::named("hwmon");

/// How often channels without an averaging interval of their own are read.
const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

/// One channel found under `/sys/class/hwmon/hwmonN`.
struct Found {
    channel: Channel,
    provenance: Provenance,
    file: File,
    /// ina3221's current file and its path, read with its bus voltage (`file`): power is
    /// their product.
    current: Option<(File, String)>,
}

/// The hwmon channels that report energy or power.
pub struct HwmonMeter {
    provenance: Provenance,
    channels: Vec<Channel>,
    provenances: Vec<Provenance>,
    files: Vec<File>,
    currents: Vec<Option<(File, String)>>,
    period: Duration,
    /// Channels the last poll could not read, and why.
    channel_errors: Vec<String>,
}

const PERMISSION_FIX: &str = "run as root, or let this user read it (chmod o+r, or a udev rule that keeps it after a reboot)";

/// What a driver's channels measure, from the driver's `name` attribute. Each mapping follows
/// the driver's own kernel documentation; none has been checked on real hardware yet, only on
/// fixture trees laid out as those pages describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HwmonClass {
    /// The whole machine: `power_meter`, the ACPI power meter
    /// (`Documentation/hwmon/acpi_power_meter.rst`).
    Platform,
    /// A GPU: `amdgpu` (`Documentation/gpu/amdgpu/thermal.rst`: `power1_average` /
    /// `power1_input`, the GPU's package power), `i915`
    /// (`Documentation/ABI/testing/sysfs-driver-intel-i915-hwmon`: `energy1_input`) and `xe`
    /// (`Documentation/ABI/testing/sysfs-driver-intel-xe-hwmon`: `energy1_input` for the card,
    /// `energy2_input` for the package, labelled `card` and `pkg`).
    Gpu,
    /// The CPU's own counters: `amd_energy` (`Documentation/hwmon/amd_energy.rst`), the same
    /// RAPL energy the CPU mechanism reads, so only its socket channels are listed, apart.
    Cpu,
    /// A board rail: the INA2xx current/power monitors (`Documentation/hwmon/ina2xx.rst`,
    /// `power1_input`; the driver registers under the chip's name, `ina219`, `ina226`, …) and
    /// `ina3221` (`Documentation/hwmon/ina3221.rst`: no power attribute, so the power of each
    /// rail is its bus voltage `inN_input` in mV times its current `currN_input` in mA).
    Rail,
    /// Any other driver that reports energy or power: read, listed as a device.
    Other,
}

impl HwmonClass {
    /// The class of driver `name`.
    pub fn of(driver: &str) -> HwmonClass {
        let ina_chip = driver.strip_prefix("ina").is_some_and(|chip| {
            !chip.is_empty() && chip.chars().all(|c| c.is_ascii_digit() || c == 'x')
        });
        match driver {
            "power_meter" => HwmonClass::Platform,
            "amdgpu" | "i915" | "xe" => HwmonClass::Gpu,
            "amd_energy" => HwmonClass::Cpu,
            _ if ina_chip => HwmonClass::Rail,
            _ => HwmonClass::Other,
        }
    }

    /// `platform`, `gpu`, `cpu`, `rail`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            HwmonClass::Platform => "platform",
            HwmonClass::Gpu => "gpu",
            HwmonClass::Cpu => "cpu",
            HwmonClass::Rail => "rail",
            HwmonClass::Other => "other",
        }
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// One attribute to read: `energyN_input`, `powerN_average`, `powerN_input`, or ina3221's
/// `inN_input` with `currN_input`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Attribute {
    prefix: &'static str,
    index: u32,
    suffix: &'static str,
}

impl Attribute {
    fn file(&self) -> String {
        format!("{}{}_{}", self.prefix, self.index, self.suffix)
    }
    /// The `_label` file beside it (`energy1_label`, `in2_label`).
    fn label_file(&self) -> String {
        format!("{}{}_label", self.prefix, self.index)
    }
}

/// The attributes of one device named `prefix` + index + `_` + one of `suffixes`, sorted.
fn attributes(dir: &Path, wanted: &[(&'static str, &'static str)]) -> Vec<Attribute> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        for &(prefix, suffix) in wanted {
            let index = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .and_then(|rest| rest.strip_suffix('_'))
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(index) = index {
                found.push(Attribute {
                    prefix,
                    index,
                    suffix,
                });
            }
        }
    }
    found.sort();
    found
}

/// The files to read of one device: its energy channels, or else one power file per index
/// (the average where there is one); for ina3221, each enabled rail's bus voltage.
fn chosen_files(dir: &Path, class: HwmonClass, driver: &str) -> Vec<Attribute> {
    let attrs = attributes(
        dir,
        &[
            ("energy", "input"),
            ("power", "input"),
            ("power", "average"),
        ],
    );
    if attrs.iter().any(|a| a.prefix == "energy") {
        let energy = attrs.into_iter().filter(|a| a.prefix == "energy");
        if class != HwmonClass::Cpu {
            return energy.collect();
        }
        // amd_energy lists every core and every socket; the cores are inside their socket.
        return energy
            .filter(|a| {
                read_trimmed(&dir.join(a.label_file())).is_some_and(|l| l.starts_with("Esocket"))
            })
            .collect();
    }
    if driver == "ina3221" {
        // Rails 1 to 3: in4 is a shunt voltage and curr4 the summed current, not a rail.
        return attributes(dir, &[("in", "input")])
            .into_iter()
            .filter(|a| (1..=3).contains(&a.index))
            .filter(|a| dir.join(format!("curr{}_input", a.index)).exists())
            .filter(|a| {
                read_trimmed(&dir.join(format!("in{}_enable", a.index))).as_deref() != Some("0")
            })
            .collect();
    }
    let mut chosen: Vec<Attribute> = Vec::new();
    for a in attrs {
        match chosen.iter_mut().find(|c| c.index == a.index) {
            Some(c) if a.suffix == "average" => *c = a,
            Some(_) => {}
            None => chosen.push(a),
        }
    }
    chosen
}

/// `hwmon3`'s number, for sorting devices numerically.
fn device_number(path: &Path) -> u32 {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("hwmon"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX)
}

/// Where a GPU driver's channel goes: the whole board (counted as the GPU) is the channel
/// labelled `card`, else the device's first; its other channels (package, VRAM) lie inside it
/// and are listed as devices, never added to it.
fn scope_of(class: HwmonClass, whole_gpu: bool) -> Domain {
    match class {
        HwmonClass::Platform => Domain::Platform,
        HwmonClass::Gpu if whole_gpu => Domain::Gpu,
        _ => Domain::Device,
    }
}

/// Whether an amdgpu device is an APU's: `Documentation/gpu/amdgpu/thermal.rst` says an APU's
/// `power1_average` includes the CPU, and APUs label their power limits `slowPPT` and `fastPPT`
/// (a discrete card's is `PPT`).
fn is_apu(driver: &str, labels: &[Option<String>]) -> bool {
    driver == "amdgpu"
        && labels
            .iter()
            .flatten()
            .any(|l| l == "slowPPT" || l == "fastPPT")
}

/// i915 and xe read a 32-bit energy register; the driver widens it when read often enough
/// (each poll here is), so a decrease is taken for a wrap only where its energy is possible.
fn counter_wrap(driver: &str) -> Wrap {
    match driver {
        "i915" | "xe" => Wrap::LikelyAt(u64::from(u32::MAX)),
        // The sysfs interface does not say where other drivers' counters wrap: a decrease is
        // reported as an error, never corrected by a guess.
        _ => Wrap::Unknown,
    }
}

/// The channels of one device, `hwmonN` at `dir`.
fn device_channels(
    dir: &Path,
    next_index: &mut std::collections::BTreeMap<Domain, u32>,
    notes: &mut Vec<String>,
    refused: &mut Option<EnergyError>,
) -> Vec<Found> {
    let hwmon = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let driver = read_trimmed(&dir.join("name")).unwrap_or_else(|| "unnamed".into());
    let mut class = HwmonClass::of(&driver);
    let chosen = chosen_files(dir, class, &driver);
    let labels: Vec<Option<String>> = chosen
        .iter()
        .map(|a| read_trimmed(&dir.join(a.label_file())).filter(|l| !l.is_empty()))
        .collect();
    if is_apu(&driver, &labels) {
        // An APU's power is the whole chip's, CPU cores included: counted as the GPU, it would
        // count the CPU twice beside RAPL.
        class = HwmonClass::Other;
        notes.push(format!(
            "{hwmon} ({driver}): an APU (its power is labelled slowPPT/fastPPT): the whole chip, CPU cores included, so a device, not a GPU"
        ));
    }
    let whole = labels
        .iter()
        .position(|l| l.as_deref() == Some("card"))
        .unwrap_or(0);
    let mut found = Vec::new();
    for (i, (a, label)) in chosen.iter().zip(&labels).enumerate() {
        let attr = a.file();
        let open = |name: &str| {
            let path = dir.join(name);
            File::open(&path).map_err(|e| EnergyError::from_io(&path, e, PERMISSION_FIX))
        };
        let current_attr = format!("curr{}_input", a.index);
        let opened = match a.prefix {
            "in" => open(&attr).and_then(|f| {
                let path = dir.join(&current_attr).display().to_string();
                Ok((f, Some((open(&current_attr)?, path))))
            }),
            _ => open(&attr).map(|f| (f, None)),
        };
        let (file, current) = match opened {
            Ok(files) => files,
            Err(e) => {
                notes.push(format!("{hwmon} ({driver}) {attr} skipped: {e}"));
                refused.get_or_insert(e);
                continue;
            }
        };
        let scope = scope_of(class, i == whole);
        let index = next_index.entry(scope).or_insert(0);
        let what = match (class, label) {
            (HwmonClass::Platform, _) => String::new(),
            (_, Some(l)) => format!(", {} {l}", class.as_str()),
            (_, None) => format!(", {}", class.as_str()),
        };
        let (kind, how) = match (a.prefix, a.suffix) {
            ("energy", _) => (ReadingKind::Counter, format!("{driver} {attr}{what}")),
            (_, "average") => (ReadingKind::WindowAverage, format!("{driver} {attr}{what}")),
            ("in", _) => (
                ReadingKind::Power,
                format!("{driver} {attr} × {current_attr}{what}, integrated"),
            ),
            _ => (
                ReadingKind::Power,
                format!("{driver} {attr}{what}, integrated"),
            ),
        };
        let path = dir.join(&attr);
        let mut channel = Channel::of_power(scope, *index, kind, path.display().to_string());
        *index += 1;
        let mut note = format!("{hwmon} ({driver}, {}) {attr}", class.as_str());
        if let Some(l) = label {
            note.push_str(&format!(" \"{l}\""));
        }
        note.push_str(&format!(" → {} {}", scope.as_str(), channel.index));
        describe_channel(&mut channel, dir, a, &driver, &mut note);
        notes.push(note);
        let mut provenance = Provenance::measured(MECHANISM);
        provenance.model = Some(how);
        found.push(Found {
            channel,
            provenance,
            file,
            current,
        });
    }
    found
}

/// Sets a channel's unit, wrap and update period from its attribute, and says them in `note`.
fn describe_channel(
    channel: &mut Channel,
    dir: &Path,
    a: &Attribute,
    driver: &str,
    note: &mut String,
) {
    match (channel.kind, a.prefix) {
        (ReadingKind::Counter, _) => {
            channel.unit_j = 1e-6;
            channel.wrap = counter_wrap(driver);
            note.push_str(match channel.wrap {
                Wrap::LikelyAt(_) => {
                    ": µJ counter of a 32-bit register, a decrease checked as a wrap"
                }
                _ => ": µJ counter, wrap limit not given by the driver",
            });
        }
        (ReadingKind::WindowAverage, _) => {
            let interval = read_trimmed(&dir.join(format!("power{}_average_interval", a.index)))
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis);
            channel.update_period = interval;
            match interval {
                Some(i) => note.push_str(&format!(": µW averaged over {} ms", i.as_millis())),
                None => note.push_str(": µW average, interval not given"),
            }
        }
        (_, "in") => note.push_str(": mV × mA, integrated by trapezoid"),
        _ => note.push_str(": µW instantaneous, integrated by trapezoid"),
    }
}

/// Every channel under `root`, with notes on what was found and skipped.
fn discover(root: &SysRoot) -> Result<(Vec<Found>, Vec<String>), EnergyError> {
    let class = root.path("sys/class/hwmon");
    let entries = std::fs::read_dir(&class).map_err(|e| {
        EnergyError::from_io(&class, e, "no hardware-monitoring driver is loaded (a machine with an ACPI power meter, an AMD or Intel GPU or INA rails has one: modprobe its driver)")
    })?;
    let mut devices: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    devices.sort_by_key(|p| device_number(p));
    let (mut found, mut notes, mut refused) = (Vec::new(), Vec::new(), None);
    let mut next_index = std::collections::BTreeMap::<Domain, u32>::new();
    for dir in devices {
        found.extend(device_channels(
            &dir,
            &mut next_index,
            &mut notes,
            &mut refused,
        ));
    }
    if found.is_empty() {
        return Err(refused.unwrap_or_else(|| EnergyError::Unusable {
            mechanism: MECHANISM,
            reason: "no hwmon driver here reports energy or power".into(),
            fix: "nothing to read on this machine (an ACPI power meter, an AMD or Intel GPU or INA rails would show here)".into(),
        }));
    }
    Ok((found, notes))
}

impl HwmonMeter {
    /// Finds the channels under `root`; also returns what `probe` should say of them.
    pub fn open(root: &SysRoot) -> Result<(HwmonMeter, Vec<String>), EnergyError> {
        let (found, notes) = discover(root)?;
        let period = found
            .iter()
            .map(|f| f.channel.update_period.unwrap_or(DEFAULT_PERIOD))
            .min()
            .unwrap_or(DEFAULT_PERIOD)
            .clamp(Duration::from_millis(50), Duration::from_secs(5));
        let mut meter = HwmonMeter {
            provenance: Provenance::measured(MECHANISM),
            channels: Vec::new(),
            provenances: Vec::new(),
            files: Vec::new(),
            currents: Vec::new(),
            period,
            channel_errors: Vec::new(),
        };
        for f in found {
            meter.channels.push(f.channel);
            meter.provenances.push(f.provenance);
            meter.files.push(f.file);
            meter.currents.push(f.current);
        }
        Ok((meter, notes))
    }
}

/// Reads one hwmon value from an open attribute file.
fn read_value(file: &File, origin: &str) -> Result<u64, EnergyError> {
    let mut buf = [0u8; 32];
    let n = file
        .read_at(&mut buf, 0)
        .map_err(|e| EnergyError::from_io(Path::new(origin), e, PERMISSION_FIX))?;
    parse_value(&String::from_utf8_lossy(&buf[..n]), origin)
}

/// Parses an hwmon value: a non-negative integer and a newline.
fn parse_value(text: &str, path: &str) -> Result<u64, EnergyError> {
    text.trim().parse::<u64>().map_err(|_| EnergyError::Malformed {
        path: path.into(),
        content: text.trim().chars().take(40).collect(),
        expected: "a non-negative integer".into(),
        fix: "the driver wrote something the sysfs interface does not allow; report it to the driver's maintainers".into(),
    })
}

impl ReadingSource for HwmonMeter {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }
    fn channel_provenance(&self, i: usize) -> Provenance {
        self.provenances
            .get(i)
            .cloned()
            .unwrap_or_else(|| self.provenance.clone())
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn poll_period(&self) -> Duration {
        self.period
    }
    fn poll_deadline(&self) -> Duration {
        Duration::from_secs(1)
    }
    /// Reads every channel; one that fails is left out of this poll (its energy waits for its
    /// next reading, which integrates from the last good one) and said in the channel errors.
    /// Fails only when no channel could be read.
    fn poll(&mut self) -> Result<Vec<Reading>, EnergyError> {
        let mut readings = Vec::with_capacity(self.channels.len());
        let mut first_error = None;
        for i in 0..self.channels.len() {
            match self.read_channel(i) {
                Ok(r) => readings.push(r),
                Err(e) => {
                    self.channel_errors.push(e.to_string());
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if readings.is_empty() => {
                self.channel_errors.clear();
                Err(e)
            }
            _ => Ok(readings),
        }
    }

    fn take_channel_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.channel_errors)
    }
}

impl HwmonMeter {
    fn read_channel(&self, i: usize) -> Result<Reading, EnergyError> {
        let channel = &self.channels[i];
        let mut v = read_value(&self.files[i], &channel.origin)?;
        if let Some((current, origin)) = &self.currents[i] {
            // ina3221: mV × mA = µW.
            v = v.saturating_mul(read_value(current, origin)?);
        }
        let now = crate::mono_ns();
        let value = match channel.kind {
            ReadingKind::Counter => ReadingValue::Counter { raw: v },
            ReadingKind::WindowAverage => ReadingValue::WindowAverage {
                watts: v as f64 * 1e-6,
                window: channel.update_period.unwrap_or(self.period),
            },
            _ => ReadingValue::Power {
                watts: v as f64 * 1e-6,
            },
        };
        Ok(Reading {
            channel: i,
            value,
            measured_ns: now,
            received_ns: now,
        })
    }
}

/// The registry's entry point: every hwmon channel, polled on its own thread.
pub(crate) fn open_mechanism(req: &OpenRequest) -> Opened {
    match HwmonMeter::open(req.root) {
        Ok((meter, notes)) => (
            PolledSource::start(Box::new(meter))
                .map(|s| Box::new(s) as Box<dyn Source>)
                .and_then(|s| crate::opening::filter(s, req.domains)),
            notes,
        ),
        Err(e) => (Err(e), vec![]),
    }
}
