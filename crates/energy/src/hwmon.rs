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
}

/// The hwmon channels that report energy or power.
pub struct HwmonMeter {
    provenance: Provenance,
    channels: Vec<Channel>,
    provenances: Vec<Provenance>,
    files: Vec<File>,
    period: Duration,
    /// Channels the last poll could not read, and why.
    channel_errors: Vec<String>,
}

const PERMISSION_FIX: &str = "run as root, or let this user read it (chmod o+r, or a udev rule that keeps it after a reboot)";

/// Scope of a driver's channels.
fn scope_of(driver: &str) -> Domain {
    match driver {
        "power_meter" => Domain::Platform,
        _ => Domain::Device,
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The channel attributes of one device: `(prefix, index, suffix)` of each file named
/// `energyN_input`, `powerN_average` or `powerN_input`, sorted.
fn attributes(dir: &Path) -> Vec<(String, u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        for prefix in ["energy", "power"] {
            let Some(rest) = name.strip_prefix(prefix) else {
                continue;
            };
            let Some((index, suffix)) = rest.split_once('_') else {
                continue;
            };
            let Ok(index) = index.parse::<u32>() else {
                continue;
            };
            if matches!(
                (prefix, suffix),
                ("energy", "input") | ("power", "input") | ("power", "average")
            ) {
                found.push((prefix.to_string(), index, suffix.to_string()));
            }
        }
    }
    found.sort();
    found
}

/// The files to read of one device: its energy channels, or else one power file per index
/// (the average where there is one).
fn chosen_files(dir: &Path) -> Vec<(String, u32, String)> {
    let attrs = attributes(dir);
    if attrs.iter().any(|(p, _, _)| p == "energy") {
        return attrs
            .into_iter()
            .filter(|(p, _, _)| p == "energy")
            .collect();
    }
    let mut chosen: Vec<(String, u32, String)> = Vec::new();
    for a in attrs {
        match chosen.iter_mut().find(|c| c.1 == a.1) {
            Some(c) if a.2 == "average" => *c = a,
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
        let hwmon = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let driver = read_trimmed(&dir.join("name")).unwrap_or_else(|| "unnamed".into());
        for (prefix, n, suffix) in chosen_files(&dir) {
            let attr = format!("{prefix}{n}_{suffix}");
            let path = dir.join(&attr);
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) => {
                    let e = EnergyError::from_io(&path, e, PERMISSION_FIX);
                    notes.push(format!("{hwmon} ({driver}) {attr} skipped: {e}"));
                    refused.get_or_insert(e);
                    continue;
                }
            };
            let scope = scope_of(&driver);
            let index = next_index.entry(scope).or_insert(0);
            let (kind, how) = match (prefix.as_str(), suffix.as_str()) {
                ("energy", _) => (ReadingKind::Counter, format!("{driver} {attr}")),
                (_, "average") => (ReadingKind::WindowAverage, format!("{driver} {attr}")),
                _ => (ReadingKind::Power, format!("{driver} {attr}, integrated")),
            };
            let mut channel = Channel::of_power(scope, *index, kind, path.display().to_string());
            *index += 1;
            let mut note = format!("{hwmon} ({driver}) {attr}");
            if kind == ReadingKind::Counter {
                channel.unit_j = 1e-6;
                // The sysfs interface does not say where a driver's counter wraps: a decrease is
                // reported as an error, never corrected by a guess.
                channel.wrap = Wrap::Unknown;
                note.push_str(": µJ counter, wrap limit not given by the driver");
            } else if kind == ReadingKind::WindowAverage {
                let interval = read_trimmed(&dir.join(format!("power{n}_average_interval")))
                    .and_then(|s| s.parse::<u64>().ok())
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis);
                channel.update_period = interval;
                match interval {
                    Some(i) => note.push_str(&format!(": µW averaged over {} ms", i.as_millis())),
                    None => note.push_str(": µW average, interval not given"),
                }
            } else {
                note.push_str(": µW instantaneous, integrated by trapezoid");
            }
            notes.push(note);
            let mut provenance = Provenance::measured(MECHANISM);
            provenance.model = Some(how);
            found.push(Found {
                channel,
                provenance,
                file,
            });
        }
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
            period,
            channel_errors: Vec::new(),
        };
        for f in found {
            meter.channels.push(f.channel);
            meter.provenances.push(f.provenance);
            meter.files.push(f.file);
        }
        Ok((meter, notes))
    }
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
        let (channel, file) = (&self.channels[i], &self.files[i]);
        let mut buf = [0u8; 32];
        let n = file
            .read_at(&mut buf, 0)
            .map_err(|e| EnergyError::from_io(Path::new(&channel.origin), e, PERMISSION_FIX))?;
        let now = crate::mono_ns();
        let text = String::from_utf8_lossy(&buf[..n]);
        let v = parse_value(&text, &channel.origin)?;
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
