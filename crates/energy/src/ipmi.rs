//! `ipmi`: the whole machine's power from its BMC, as DCMI's Get Power Reading reports it.
//!
//! DCMI 1.5 §6.6.1 (Get Power Reading): the current power, the minimum, maximum and average
//! over a sampling period, the period itself and whether the reading is active, in whole watts.
//! It is a window average that arrives late (a BMC answers in milliseconds to seconds), so it is
//! polled on its own thread ([`crate::PolledSource`]), once per sampling period and at most once
//! a second, each reading dated when it was asked for. It is read in-band through `ipmitool
//! dcmi power reading` (the kernel's IPMI device interface, `/dev/ipmi0`), whose output is
//! parsed as ipmitool 1.8.19 prints it; `WATTIO_IPMITOOL` names another program that prints the
//! same. Offered whenever the kernel shows an IPMI device.

use crate::error::EnergyError;
use crate::opening::{OpenRequest, Opened};
use crate::polled::{PolledSource, ReadingSource};
use crate::reading::{Channel, Reading, ReadingKind, ReadingValue};
use crate::types::{Domain, Mechanism, Provenance};
use crate::Source;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The registry's name for this mechanism.
pub(crate) const MECHANISM: Mechanism = Mechanism::named("ipmi");

/// The program that asks the BMC (default `ipmitool` on `PATH`).
pub const IPMITOOL_ENV: &str = "WATTIO_IPMITOOL";

/// How long one answer may take before the request is given up and the program killed.
const DEADLINE: Duration = Duration::from_secs(10);
/// The least time between two requests: a BMC is a small controller shared with other agents.
const MIN_PERIOD: Duration = Duration::from_secs(1);
/// At most this much of the program's output is read.
const MAX_OUTPUT: u64 = 64 * 1024;

/// What one DCMI power reading says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcmiReading {
    pub instantaneous_w: f64,
    pub average_w: f64,
    /// The period the average covers (`None` when the BMC gives none).
    pub sampling_period: Option<Duration>,
}

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

/// The BMC's power reading through ipmitool.
pub struct IpmiMeter {
    program: String,
    provenance: Provenance,
    channels: Vec<Channel>,
    period: Duration,
    window: Option<Duration>,
    /// The answer `open` asked for, handed out by the first poll (a BMC that answers in
    /// seconds is not asked twice at start).
    first: Option<Reading>,
}

/// The IPMI device the kernel's `ipmi_devintf` creates, under the root.
fn ipmi_device(req: &OpenRequest) -> Option<std::path::PathBuf> {
    ["dev/ipmi0", "dev/ipmi/0", "dev/ipmidev/0"]
        .into_iter()
        .map(|p| req.root.path(p))
        .find(|p| p.exists())
}

/// Runs the program once, within [`DEADLINE`], and returns its output.
fn ask(program: &str) -> Result<String, EnergyError> {
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
    fn open(req: &OpenRequest) -> Result<IpmiMeter, EnergyError> {
        let device = ipmi_device(req).ok_or_else(|| EnergyError::Missing {
            path: req.root.path("dev/ipmi0"),
            fix: "no BMC is visible here: on a server with one, load the kernel's IPMI drivers (modprobe ipmi_si ipmi_devintf)".into(),
        })?;
        let program = std::env::var(IPMITOOL_ENV).unwrap_or_else(|_| "ipmitool".into());
        let asked = crate::mono_ns();
        let first = parse_dcmi_reading(&ask(&program)?).map_err(|reason| EnergyError::Malformed {
            path: device.clone(),
            content: String::new(),
            expected: reason,
            fix: "this ipmitool prints its DCMI power reading in a form wattio does not know; report it with the output".into(),
        })?;
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
            Some(w) => format!("dcmi, {} average", format_period(w)),
            None => "dcmi average, period not given".into(),
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
            program,
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
        let r = parse_dcmi_reading(&ask(&self.program)?).map_err(|reason| {
            EnergyError::Invalid(format!("{}: {reason}", self.channels[0].origin))
        })?;
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
    let meter = IpmiMeter::open(req);
    let notes = match &meter {
        Ok(m) => vec![format!(
            "the BMC's DCMI power reading (whole watts), polled every {}",
            format_period(m.period)
        )],
        Err(_) => vec![],
    };
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
}
