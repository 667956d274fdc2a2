//! `ipmi`: the whole machine's power from its BMC, as DCMI's Get Power Reading reports it.
//!
//! DCMI 1.5 §6.6.1 (Get Power Reading, mode 1: system power statistics): the current power, the
//! minimum, maximum and average over the statistics reporting period, the period itself, the
//! BMC's timestamp and whether the reading is active, in whole watts (decoded in `dcmi.rs`). It
//! is a window average that arrives late (a BMC answers in milliseconds to seconds), so it is
//! polled on its own thread ([`crate::PolledSource`]), once per reporting period and at most
//! once a second. Offered whenever the kernel shows an IPMI device.
//!
//! Two routes reach the BMC, and the label says which:
//! - **in-band** (`measured (ipmi dcmi in-band, 1 s average)`): wattio sends the request itself
//!   through the kernel's IPMI device interface, `/dev/ipmi0` (`ipmi_device.rs`: the
//!   `IPMICTL_SEND_COMMAND` and `IPMICTL_RECEIVE_MSG_TRUNC` ioctls), the default wherever that
//!   is a character device. It also asks Get Device ID once, for `probe`'s note on which BMC
//!   answered.
//! - **ipmitool** (`measured (ipmi dcmi, 1 s average)`): `ipmitool dcmi power reading`, parsed
//!   as ipmitool 1.8.19 prints it, when `WATTIO_IPMITOOL` names a program (a stand-in, as the
//!   `server-platform` fixture's) or the device is not a character device (a fixture's file).
//!
//! Each reading is dated when it was asked for, on either route. The BMC's own IPMI timestamp
//! is not used: it is the BMC's clock in whole seconds, set apart from the host's (often
//! minutes off, or 0xFFFFFFFF "unspecified"), so mapping it onto CLOCK_MONOTONIC would add an
//! unknown offset larger than the second it resolves; the moment of asking is a bound on the
//! window's end that needs no clock of the BMC's. The reporting period is taken as the window.

use crate::dcmi::{self, DcmiReading, DcmiRefusal};
use crate::error::EnergyError;
use crate::ipmi_device::BmcLink;
use crate::opening::{OpenRequest, Opened};
use crate::polled::{PolledSource, ReadingSource};
use crate::reading::{Channel, Reading, ReadingKind, ReadingValue};
use crate::types::{Domain, Mechanism, Provenance};
use crate::Source;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The registry's name for this mechanism.
pub(crate) const MECHANISM: Mechanism = Mechanism::named("ipmi");

/// A program that prints `ipmitool dcmi power reading`'s output: set, the BMC is asked through
/// it instead of in-band.
pub const IPMITOOL_ENV: &str = "WATTIO_IPMITOOL";

/// How long one answer may take before the request is given up (and a program killed).
const DEADLINE: Duration = Duration::from_secs(10);
/// The least time between two requests: a BMC is a small controller shared with other agents.
const MIN_PERIOD: Duration = Duration::from_secs(1);
/// At most this much of the program's output is read.
const MAX_OUTPUT: u64 = 64 * 1024;
/// The fix where the kernel's IPMI drivers are not loaded.
const LOAD_DRIVERS: &str = "load the kernel's IPMI drivers (modprobe ipmi_devintf ipmi_si)";

/// Parses `ipmitool dcmi power reading`'s output.
pub fn parse_dcmi_reading(text: &str) -> Result<DcmiReading, String> {
    let field = |label: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|rest| rest.trim_start_matches([' ', ':']).trim())
    };
    let watts = |label: &str| -> Result<f64, String> {
        let v = field(label).ok_or_else(|| format!("no '{label}' line"))?;
        let n = v.split_whitespace().next().unwrap_or("");
        n.parse::<u32>()
            .map(f64::from)
            .map_err(|_| format!("'{label}' is {v:?}, not whole watts"))
    };
    if let Some(state) = field("Power reading state is") {
        if state != "activated" {
            return Err(format!(
                "the BMC's power reading is {state} (ipmitool dcmi power reading shows it; some BMCs need it activated in their settings)"
            ));
        }
    }
    let sampling_period = match field("Sampling period") {
        Some(v) => {
            let mut words = v.split_whitespace();
            let n: u64 = words
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("'Sampling period' is {v:?}"))?;
            let unit = words.next().unwrap_or("Seconds.").to_ascii_lowercase();
            let d = if unit.starts_with("milli") {
                Duration::from_millis(n)
            } else {
                Duration::from_secs(n)
            };
            (!d.is_zero()).then_some(d)
        }
        None => None,
    };
    Ok(DcmiReading {
        instantaneous_w: watts("Instantaneous power reading")?,
        average_w: watts("Average power reading over sample period")?,
        sampling_period,
    })
}

/// How the BMC is asked.
enum Route {
    /// In-band, through the kernel's IPMI device interface.
    InBand(BmcLink),
    /// Through `ipmitool dcmi power reading` (or the program `WATTIO_IPMITOOL` names).
    Ipmitool(String),
}

impl Route {
    /// In-band where `device` is a character device and no program is named; else ipmitool.
    fn choose(device: &Path) -> Result<Route, EnergyError> {
        if let Ok(program) = std::env::var(IPMITOOL_ENV) {
            return Ok(Route::Ipmitool(program));
        }
        let char_device = std::fs::metadata(device).is_ok_and(|m| m.file_type().is_char_device());
        if !char_device {
            return Ok(Route::Ipmitool("ipmitool".into()));
        }
        BmcLink::open(device)
            .map(Route::InBand)
            .map_err(|e| open_error(device, e))
    }

    /// `dcmi in-band` or `dcmi`, for the label.
    fn name(&self) -> &'static str {
        match self {
            Route::InBand(_) => "dcmi in-band",
            Route::Ipmitool(_) => "dcmi",
        }
    }

    /// One power reading, within [`DEADLINE`].
    fn ask(&mut self, device: &Path) -> Result<DcmiReading, EnergyError> {
        match self {
            Route::InBand(link) => {
                let answer = link
                    .request(
                        dcmi::NETFN_GROUP_EXTENSION,
                        dcmi::CMD_GET_POWER_READING,
                        &dcmi::POWER_READING_REQUEST,
                        DEADLINE,
                    )
                    .map_err(|e| request_error(device, e))?;
                dcmi::decode_power_reading(&answer.data).map_err(|r| refused(&r))
            }
            Route::Ipmitool(program) => parse_dcmi_reading(&run_ipmitool(program)?).map_err(|reason| EnergyError::Malformed {
                path: device.to_path_buf(),
                content: String::new(),
                expected: reason,
                fix: "this ipmitool prints its DCMI power reading in a form wattio does not know; report it with the output".into(),
            }),
        }
    }

    /// In-band: which BMC answers, from Get Device ID, for `probe`'s note.
    fn identify(&mut self, device: &Path) -> Option<String> {
        let Route::InBand(link) = self else {
            return None;
        };
        let answer = link.request(dcmi::NETFN_APP, dcmi::CMD_GET_DEVICE_ID, &[], DEADLINE);
        Some(
            match answer
                .map_err(|e| e.to_string())
                .and_then(|a| dcmi::decode_device_id(&a.data))
            {
                Ok(id) => format!("the BMC behind {} answers in-band: {id}", device.display()),
                Err(e) => format!(
                    "the BMC behind {} did not identify itself (Get Device ID: {e})",
                    device.display()
                ),
            },
        )
    }
}

/// A refused power reading, as the mechanism's error.
fn refused(r: &DcmiRefusal) -> EnergyError {
    EnergyError::Unusable {
        mechanism: MECHANISM,
        reason: r.to_string(),
        fix: r.fix().into(),
    }
}

/// Why the device cannot be opened, with the fix: permission, or drivers not loaded.
fn open_error(device: &Path, e: std::io::Error) -> EnergyError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => EnergyError::Permission {
            path: device.to_path_buf(),
            fix: "run as root, or give a group read-write access with a udev rule (KERNEL==\"ipmi[0-9]*\", GROUP=\"wattio\", MODE=\"0660\") and add the user to it".into(),
        },
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => EnergyError::Missing {
            path: device.to_path_buf(),
            fix: LOAD_DRIVERS.into(),
        },
        _ => EnergyError::Io {
            path: device.to_path_buf(),
            err: e,
        },
    }
}

/// A request that got no answer: the deadline, or the driver's error.
fn request_error(device: &Path, e: std::io::Error) -> EnergyError {
    if e.kind() == std::io::ErrorKind::TimedOut {
        return EnergyError::Unusable {
            mechanism: MECHANISM,
            reason: format!("the BMC behind {} did not answer: {e}", device.display()),
            fix: "check the BMC (ipmitool mc info); a busy BMC answers again later".into(),
        };
    }
    EnergyError::Io {
        path: device.to_path_buf(),
        err: e,
    }
}

/// The BMC's power reading, in-band or through ipmitool.
pub struct IpmiMeter {
    route: Route,
    device: PathBuf,
    provenance: Provenance,
    channels: Vec<Channel>,
    period: Duration,
    window: Option<Duration>,
    /// The answer `open` asked for, handed out by the first poll (a BMC that answers in
    /// seconds is not asked twice at start).
    first: Option<Reading>,
}

/// The IPMI device the kernel's `ipmi_devintf` creates, under the root.
fn ipmi_device(req: &OpenRequest) -> Option<PathBuf> {
    ["dev/ipmi0", "dev/ipmi/0", "dev/ipmidev/0"]
        .into_iter()
        .map(|p| req.root.path(p))
        .find(|p| p.exists())
}

/// Runs the program once, within [`DEADLINE`], and returns its output.
fn run_ipmitool(program: &str) -> Result<String, EnergyError> {
    let unusable = |reason: String, fix: &str| EnergyError::Unusable {
        mechanism: MECHANISM,
        reason,
        fix: fix.into(),
    };
    let mut child = Command::new(program)
        .args(["dcmi", "power", "reading"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            unusable(
                format!("cannot run {program}: {e}"),
                "install ipmitool (apt-get install ipmitool), or set WATTIO_IPMITOOL to it",
            )
        })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < DEADLINE => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(unusable(
                    format!("the BMC did not answer within {} s", DEADLINE.as_secs()),
                    "check the BMC (ipmitool mc info); a busy BMC answers again later",
                ));
            }
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(o) = child.stdout.take() {
        let _ = o.take(MAX_OUTPUT).read_to_string(&mut out);
    }
    if let Some(e) = child.stderr.take() {
        let _ = e.take(MAX_OUTPUT).read_to_string(&mut err);
    }
    if !status.success() {
        let why = err
            .lines()
            .chain(out.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(unusable(
            format!(
                "no DCMI power reading on this BMC ({program} said: {})",
                why.trim()
            ),
            "a BMC without DCMI power management cannot report the machine's power this way",
        ));
    }
    Ok(out)
}

impl IpmiMeter {
    /// Asks the BMC once: a BMC without DCMI power readings is refused here with its answer.
    /// What `probe` should know either way (which BMC answered) goes to `notes`.
    fn open(req: &OpenRequest, notes: &mut Vec<String>) -> Result<IpmiMeter, EnergyError> {
        let device = ipmi_device(req).ok_or_else(|| EnergyError::Missing {
            path: req.root.path("dev/ipmi0"),
            fix: format!("no BMC is visible here: on a server with one, {LOAD_DRIVERS}"),
        })?;
        let mut route = Route::choose(&device)?;
        notes.extend(route.identify(&device));
        let asked = crate::mono_ns();
        let first = route.ask(&device)?;
        let window = first.sampling_period;
        let period = window.unwrap_or(MIN_PERIOD).max(MIN_PERIOD);
        let mut channel = Channel::of_power(
            Domain::Platform,
            0,
            ReadingKind::WindowAverage,
            format!("{} (dcmi power reading)", device.display()),
        );
        channel.update_period = window;
        // DCMI Get Power Reading answers whole watts (DCMI 1.5, table 6-16).
        channel.resolution_w = 1.0;
        let how = match window {
            Some(w) => format!("{}, {} average", route.name(), format_period(w)),
            None => format!("{} average, period not given", route.name()),
        };
        let mut provenance = Provenance::measured(MECHANISM);
        provenance.model = Some(how);
        let first = Reading {
            channel: 0,
            value: ReadingValue::WindowAverage {
                watts: first.average_w,
                window: window.unwrap_or(period),
            },
            measured_ns: asked,
            received_ns: crate::mono_ns(),
        };
        Ok(IpmiMeter {
            route,
            device,
            provenance,
            channels: vec![channel],
            period,
            window,
            first: Some(first),
        })
    }
}

/// `1 s`, `500 ms`.
fn format_period(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

impl ReadingSource for IpmiMeter {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn poll_period(&self) -> Duration {
        self.period
    }
    fn poll_deadline(&self) -> Duration {
        DEADLINE
    }
    fn poll(&mut self) -> Result<Vec<Reading>, EnergyError> {
        if let Some(first) = self.first.take() {
            return Ok(vec![first]);
        }
        let asked = crate::mono_ns();
        let r = self.route.ask(&self.device)?;
        Ok(vec![Reading {
            channel: 0,
            value: ReadingValue::WindowAverage {
                watts: r.average_w,
                window: r.sampling_period.or(self.window).unwrap_or(self.period),
            },
            // The BMC averaged over the period before it was asked; its answer may come late.
            measured_ns: asked,
            received_ns: crate::mono_ns(),
        }])
    }
}

/// The registry's entry point.
pub(crate) fn open_mechanism(req: &OpenRequest) -> Opened {
    let mut notes = Vec::new();
    let meter = IpmiMeter::open(req, &mut notes);
    if let Ok(m) = &meter {
        notes.push(format!(
            "the BMC's DCMI power reading (whole watts), polled every {}",
            format_period(m.period)
        ));
    }
    (
        meter
            .and_then(|m| PolledSource::start(Box::new(m)))
            .map(|s| Box::new(s) as Box<dyn Source>)
            .and_then(|s| crate::opening::filter(s, req.domains)),
        notes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As ipmitool 1.8.19 prints it (its `ipmi_dcmi.c` format strings).
    const IPMITOOL_1_8_19: &str = "
    Instantaneous power reading:                   212 Watts
    Minimum during sampling period:                 28 Watts
    Maximum during sampling period:                294 Watts
    Average power reading over sample period:      184 Watts
    IPMI timestamp:                           Sun Dec  6 06:00:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated

";

    #[test]
    fn parses_ipmitools_dcmi_power_reading() {
        let r = parse_dcmi_reading(IPMITOOL_1_8_19).unwrap();
        assert_eq!(r.instantaneous_w, 212.0);
        assert_eq!(r.average_w, 184.0);
        assert_eq!(r.sampling_period, Some(Duration::from_secs(1)));
        let ms = IPMITOOL_1_8_19.replace("00000001 Seconds.", "1000 Milliseconds");
        assert_eq!(
            parse_dcmi_reading(&ms).unwrap().sampling_period,
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn a_deactivated_or_garbled_reading_is_refused_with_the_reason() {
        let off = IPMITOOL_1_8_19.replace(
            "is:                   activated",
            "is:                   deactivated",
        );
        assert!(parse_dcmi_reading(&off)
            .unwrap_err()
            .contains("deactivated"));
        let garbled = IPMITOOL_1_8_19.replace("184 Watts", "lots Watts");
        assert!(parse_dcmi_reading(&garbled)
            .unwrap_err()
            .contains("not whole watts"));
        assert!(parse_dcmi_reading("")
            .unwrap_err()
            .contains("Instantaneous"));
    }

    #[test]
    fn permission_and_missing_drivers_say_the_fix() {
        let dev = Path::new("/dev/ipmi0");
        let e = open_error(dev, std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(e, EnergyError::Permission { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains("run as root") && e.contains("udev rule"), "{e}");
        for errno in [libc::ENODEV, libc::ENXIO] {
            let e = open_error(dev, std::io::Error::from_raw_os_error(errno)).to_string();
            assert!(e.contains("modprobe ipmi_devintf ipmi_si"), "{e}");
        }
    }

    /// A root whose `dev/ipmi0` is `target`, and the mechanism opened on it.
    fn open_on(target: &Path) -> (Result<Box<dyn Source>, EnergyError>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dev")).unwrap();
        std::os::unix::fs::symlink(target, dir.path().join("dev/ipmi0")).unwrap();
        let root = crate::SysRoot::new(dir.path());
        let params = crate::ModelParams::default();
        open_mechanism(&OpenRequest {
            root: &root,
            domains: None,
            params: &params,
            platforms: &[],
        })
    }

    #[test]
    fn a_character_device_is_asked_in_band_and_a_file_through_ipmitool() {
        if std::env::var_os(IPMITOOL_ENV).is_some() {
            eprintln!("skipped: {IPMITOOL_ENV} is set");
            return;
        }
        // /dev/null is a character device that knows no IPMI ioctl: the in-band route is
        // taken, and both of its requests fail with the ioctl's error.
        let (r, notes) = open_on(Path::new("/dev/null"));
        let e = r.err().unwrap().to_string();
        assert!(e.contains("IPMICTL_SEND_COMMAND"), "{e}");
        assert!(
            notes.len() == 1
                && notes[0]
                    .contains("did not identify itself (Get Device ID: IPMICTL_SEND_COMMAND"),
            "{notes:?}"
        );
        // A plain file (a fixture's) is ipmitool's to read; the route says so.
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(matches!(
            Route::choose(file.path()),
            Ok(Route::Ipmitool(p)) if p == "ipmitool"
        ));
        assert_eq!(Route::Ipmitool("x".into()).name(), "dcmi");
    }
}
