//! `redfish`: the whole machine's power or energy as its BMC reports it over Redfish
//! (`--platform redfish://BMC`), read beside the CPU as a platform meter.
//!
//! Redfish is DMTF's HTTP interface to a server's management controller (DSP0266, the
//! protocol; DSP0268, the schemas). wattio finds the chassis in `/redfish/v1/Chassis` (or the
//! one the URL names) and reads, in this order of preference, the first that gives a figure:
//!
//! 1. the chassis's `EnvironmentMetrics` (EnvironmentMetrics v1): `EnergyJoules`, else
//!    `PowerWatts`, else `EnergykWh`, each read from the `Sensor` its `DataSourceUri` names
//!    where it names one (for the reading's `ReadingTime`, `SensingInterval` and `Precision`),
//!    else from the excerpt;
//! 2. the chassis's `Sensors` (Sensor v1) whose `ReadingType` is `EnergyJoules`, `Power` or
//!    `EnergykWh` and whose `PhysicalContext` is the chassis (or not given);
//! 3. the deprecated `Power` resource (Power v1): `PowerControl[].PowerConsumedWatts`.
//!
//! A joule counter is preferred to a power reading (the difference of two counter values is
//! the energy between them, whatever the BMC averaged); a kWh counter comes last (its steps are
//! usually 3.6 kJ or more). Counters are [`ReadingValue::Counter`]s, powers
//! [`ReadingValue::WindowAverage`]s over the sensor's `SensingInterval` (or the poll period).
//! A reading is dated by its `ReadingTime`, its age taken on the BMC's own clock (the answer's
//! `Date`), so a late or averaged reading is placed where it was measured; a reading older
//! than [`MAX_AGE_ENV`] (default the larger of 15 s and three sensing intervals), and a
//! counter unchanged that long, is stale: no energy is made up for it, and the next reading
//! starts afresh. The BMC is asked once per [`INTERVAL_ENV`] (default 1 s) after the few
//! requests that find the resource.

mod client;
mod decode;
mod url;

pub use client::{AUTH_ENV, CACERT_ENV, CREDENTIALS_ENV, PASSWORD_ENV, USER_ENV};
pub use url::PlatformUrl;

use crate::error::EnergyError;
use crate::opening::{OpenRequest, Opened};
use crate::polled::{PolledSource, ReadingSource};
use crate::reading::{Channel, Reading, ReadingKind, ReadingValue};
use crate::types::{Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use client::{Answer, Client, ANSWER_DEADLINE};
use decode::{Figure, Quantity};
use serde_json::Value;
use std::time::Duration;

/// The registry's name for this mechanism.
pub(crate) const MECHANISM: Mechanism = Mechanism::named("redfish");

/// Seconds between two requests to one BMC (default 1, from 0.5 to 600).
pub const INTERVAL_ENV: &str = "WATTIO_REDFISH_INTERVAL";
/// Seconds after which a reading is stale (default: the larger of 15 s and three sensing
/// intervals; from 1 to 3600).
pub const MAX_AGE_ENV: &str = "WATTIO_REDFISH_MAX_AGE";

const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(15);
/// The most chassis, and sensors per chassis, looked at while finding the figure.
const MAX_CHASSIS: usize = 16;
const MAX_SENSORS: usize = 64;

/// Joules per raw step of a joule counter (1 mJ) and of a kWh counter (1 mWh = 3.6 J).
const JOULE_STEP: f64 = 1e-3;
const KWH_STEP: f64 = 3.6;

/// A duration in seconds from `name`, within `min..=max`; `default` when unset.
fn seconds_env(name: &str, default: Duration, min: f64, max: f64) -> Result<Duration, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim().trim_end_matches('s').parse::<f64>() {
            Ok(s) if (min..=max).contains(&s) => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!("{name}={v:?}: give seconds from {min} to {max}")),
        },
    }
}

/// How a figure is read on each poll.
#[derive(Debug, Clone, Copy, PartialEq)]
enum How {
    /// EnvironmentMetrics' excerpt of the quantity.
    Excerpt(Quantity),
    /// A Sensor resource of the quantity.
    Sensor(Quantity),
    /// The Power resource's `PowerControl`.
    PowerControl,
}

impl How {
    fn quantity(self) -> Quantity {
        match self {
            How::Excerpt(q) | How::Sensor(q) => q,
            How::PowerControl => Quantity::Power,
        }
    }
}

/// What discovery chose: the resource to ask each time, and its first figure.
struct Plan {
    path: String,
    how: How,
    /// `EnvironmentMetrics PowerWatts`, `Sensor TotalPower`, `Power PowerConsumedWatts`.
    what: String,
    chassis: String,
    first: Figure,
    first_bmc_now_s: Option<f64>,
    /// `PowerMetrics.IntervalInMin` of a Power resource, said in probe's notes.
    power_metrics_interval: Option<Duration>,
}

/// Reads the figure of `how` from an answer.
fn figure(json: &Value, how: How) -> Result<Figure, String> {
    match how {
        How::Excerpt(q) => decode::environment_excerpt(json, q)
            .unwrap_or_else(|| Err(format!("no {} in EnvironmentMetrics", q.property())))
            .map(|(f, _)| f),
        How::Sensor(q) => decode::sensor(json, q),
        How::PowerControl => decode::power_control(json)
            .unwrap_or_else(|| Err("no PowerControl with PowerConsumedWatts".into()))
            .map(|(f, _)| f),
    }
}

/// The chassis's own id (`Id`, else its path's last segment).
fn chassis_id(path: &str, json: &Value) -> String {
    json.get("Id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path).to_string())
}

/// The first figure of one chassis, in the order of preference; or why there is none.
fn plan_for_chassis(client: &mut Client, path: &str, json: &Value) -> Result<Plan, String> {
    let chassis = chassis_id(path, json);
    let plan = |path: String, how: How, what: String, first: &Answer, f: Figure| Plan {
        path,
        how,
        what,
        chassis: chassis.clone(),
        first: f,
        first_bmc_now_s: first.bmc_now_s,
        power_metrics_interval: None,
    };
    let mut why = Vec::new();
    if let Some(env) = decode::link(json, "EnvironmentMetrics") {
        let a = client.get(&env)?;
        for q in Quantity::PREFERRED {
            match decode::environment_excerpt(&a.json, q) {
                None => {}
                Some(Err(w)) => why.push(format!("EnvironmentMetrics: {w}")),
                Some(Ok((f, source))) => {
                    let what = format!("EnvironmentMetrics {}", q.property());
                    // The Sensor behind the excerpt dates its reading; the excerpt does not.
                    if let Some(src) = source {
                        let s = client.get(&src)?;
                        match decode::sensor(&s.json, q) {
                            Ok(sf) => return Ok(plan(src, How::Sensor(q), what, &s, sf)),
                            Err(w) => why.push(format!("{src}: {w}")),
                        }
                    }
                    return Ok(plan(env, How::Excerpt(q), what, &a, f));
                }
            }
        }
    } else {
        why.push("no EnvironmentMetrics".into());
    }
    if let Some(sensors) = decode::link(json, "Sensors") {
        let list = decode::members(&client.get(&sensors)?.json, MAX_SENSORS);
        let mut best: Option<(usize, Plan)> = None;
        for m in list {
            let s = client.get(&m)?;
            for (rank, q) in Quantity::PREFERRED.into_iter().enumerate() {
                if best.as_ref().is_some_and(|(r, _)| *r <= rank)
                    || !decode::is_chassis_sensor(&s.json, q)
                {
                    continue;
                }
                match decode::sensor(&s.json, q) {
                    Ok(f) => {
                        let name = s.json.get("Id").and_then(Value::as_str).unwrap_or("?");
                        let what = format!("Sensor {name} ({})", q.property());
                        best = Some((rank, plan(m.clone(), How::Sensor(q), what, &s, f)));
                    }
                    Err(w) => why.push(format!("{m}: {w}")),
                }
            }
            if best.as_ref().is_some_and(|(r, _)| *r == 0) {
                break;
            }
        }
        if let Some((_, p)) = best {
            return Ok(p);
        }
        why.push("no chassis power or energy Sensor".into());
    }
    if let Some(power) = decode::link(json, "Power") {
        let a = client.get(&power)?;
        match decode::power_control(&a.json) {
            Some(Ok((f, interval))) => {
                let what = "Power PowerConsumedWatts".to_string();
                let mut p = plan(power, How::PowerControl, what, &a, f);
                p.power_metrics_interval = interval;
                return Ok(p);
            }
            Some(Err(w)) => why.push(format!("Power: {w}")),
            None => why.push("Power has no PowerControl with PowerConsumedWatts".into()),
        }
    }
    Err(format!("chassis {chassis}: {}", why.join("; ")))
}

/// Finds the chassis and the figure to read.
fn discover(client: &mut Client, url: &PlatformUrl) -> Result<Plan, String> {
    let root = client.start()?;
    let collection =
        decode::link(&root.json, "Chassis").unwrap_or_else(|| "/redfish/v1/Chassis".into());
    let chassis = match &url.chassis {
        Some(id) => vec![format!("{}/{id}", collection.trim_end_matches('/'))],
        None => decode::members(&client.get(&collection)?.json, MAX_CHASSIS),
    };
    if chassis.is_empty() {
        return Err(format!("{url}: {collection} lists no chassis"));
    }
    // The enclosures no other chassis contains come first: a GPU board or a sled listed
    // before its enclosure must not be read as the whole machine.
    let mut listed = Vec::with_capacity(chassis.len());
    for path in chassis {
        let json = client.get(&path)?.json;
        let contained = json.pointer("/Links/ContainedBy").is_some();
        listed.push((contained, path, json));
    }
    listed.sort_by_key(|(contained, _, _)| *contained);
    let mut why = Vec::new();
    for (_, path, json) in listed {
        match plan_for_chassis(client, &path, &json) {
            Ok(p) => return Ok(p),
            Err(w) => why.push(w),
        }
    }
    Err(format!(
        "{url}: no power or energy reading in any chassis ({})",
        why.join("; ")
    ))
}

/// The BMC's clock when its answer arrived, to age a `ReadingTime` by: this machine's clock
/// where the answer's `Date` agrees with it (stamped between the request and the answer's
/// arrival, give or take 2 s: both clocks kept by NTP; ours is finer than `Date`'s whole
/// seconds, and counts the time the answer spent on its way), else the `Date` itself, at the
/// middle of its second (the BMC's clock is off: only its own difference is trusted).
fn bmc_clock(date_s: Option<f64>, local_s: f64, answer_took_s: f64) -> f64 {
    match date_s {
        Some(d) if d > local_s + 2.0 || d < local_s - answer_took_s - 2.0 => d + 0.5,
        _ => local_s,
    }
}

/// One BMC's chassis figure, polled.
pub struct RedfishMeter {
    client: Client,
    url: PlatformUrl,
    how: How,
    path: String,
    provenance: Provenance,
    channels: Vec<Channel>,
    period: Duration,
    max_age: Duration,
    /// The window of a power reading (its sensing interval, else the poll period).
    window: Duration,
    /// The first reading, taken at open, handed out by the first poll.
    first: Option<Reading>,
    /// The newest reading's `ReadingTime`, and a counter's newest value: an answer that
    /// repeats them is no new reading.
    last_time_s: Option<f64>,
    last_raw: Option<u64>,
    /// The channel must start afresh (a stale reading was refused).
    gap: bool,
    errors: Vec<String>,
    notes: Vec<String>,
}

/// `30 s`, `500 ms`.
fn format_period(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

impl RedfishMeter {
    /// Connects, logs in and finds the figure: a BMC that cannot give one is refused here.
    pub fn open(url: &PlatformUrl) -> Result<RedfishMeter, String> {
        let period = seconds_env(INTERVAL_ENV, DEFAULT_INTERVAL, 0.5, 600.0)?;
        let mut client = Client::new(url)?;
        let asked = crate::mono_ns();
        let plan = discover(&mut client, url)?;
        let received = crate::mono_ns();
        let q = plan.how.quantity();
        let interval = plan.first.interval;
        let default_age = DEFAULT_MAX_AGE.max(interval.unwrap_or_default() * 3);
        let max_age = seconds_env(MAX_AGE_ENV, default_age, 1.0, 3600.0)?;
        let origin = format!("{url} {}", plan.path);
        let mut channel = match q {
            Quantity::Power => {
                Channel::of_power(Domain::Platform, 0, ReadingKind::WindowAverage, origin)
            }
            Quantity::EnergyJoules | Quantity::EnergykWh => Channel {
                scope: Domain::Platform,
                index: 0,
                kind: ReadingKind::Counter,
                unit_j: if q == Quantity::EnergyJoules {
                    JOULE_STEP
                } else {
                    KWH_STEP
                },
                // A BMC's counter restarts at its SensorResetTime, not at a known limit.
                wrap: Wrap::Unknown,
                update_period: None,
                resolution_w: 0.0,
                resolution_j: 0.0,
                origin,
            },
        };
        channel.update_period = interval;
        // A power's step is over every second of a window; a counter's only at its two ends.
        match q {
            // Whole watts where the BMC does not say its precision.
            Quantity::Power => channel.resolution_w = plan.first.step.unwrap_or(1.0),
            Quantity::EnergyJoules => channel.resolution_j = plan.first.step.unwrap_or(1.0),
            Quantity::EnergykWh => {
                channel.resolution_j = plan.first.step.unwrap_or(0.001) * 3.6e6;
            }
        }
        let averaging = match (q, interval) {
            (Quantity::Power, Some(w)) => format!("{} average", format_period(w)),
            (Quantity::Power, None) => "averaging not given".into(),
            (_, Some(w)) => format!("counter, updated every {}", format_period(w)),
            (_, None) => "counter".into(),
        };
        let mut provenance = Provenance::measured(MECHANISM);
        provenance.model = Some(format!(
            "{}, chassis {}, {averaging}",
            plan.what, plan.chassis
        ));
        let mut notes = vec![format!(
            "{url}: chassis {}, {} from {}, asked every {} (at most one request each time); stale after {}",
            plan.chassis,
            plan.what,
            plan.path,
            format_period(period),
            format_period(max_age),
        )];
        if let Some(m) = plan.power_metrics_interval {
            notes.push(format!(
                "{url}: PowerConsumedWatts is read as an average over the poll period; the BMC's PowerMetrics average over {} is not used (too long for a run)",
                format_period(m)
            ));
        }
        let mut meter = RedfishMeter {
            client,
            url: url.clone(),
            how: plan.how,
            path: plan.path,
            provenance,
            channels: vec![channel],
            period,
            max_age,
            window: interval.unwrap_or(period),
            first: None,
            last_time_s: None,
            last_raw: None,
            gap: false,
            errors: Vec::new(),
            notes,
        };
        match meter.reading(plan.first, plan.first_bmc_now_s, asked, received) {
            Some(Ok(r)) => {
                meter.notes.push(format!(
                    "{url}: its reading was {:.1} s old when it arrived",
                    r.age().as_secs_f64()
                ));
                meter.first = Some(r);
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
        Ok(meter)
    }

    /// A figure as a reading: `None` when it repeats the previous one (no new reading), an
    /// error when it is stale.
    fn reading(
        &mut self,
        f: Figure,
        bmc_now_s: Option<f64>,
        asked_ns: u64,
        received_ns: u64,
    ) -> Option<Result<Reading, String>> {
        let origin = &self.channels[0].origin;
        let measured_ns = match f.reading_time_s {
            Some(t) => {
                if self.last_time_s == Some(t) {
                    return None;
                }
                let took_s = received_ns.saturating_sub(asked_ns) as f64 / 1e9;
                let now = bmc_clock(bmc_now_s, Client::local_now_s(), took_s);
                let age = (now - t).max(0.0);
                if age > self.max_age.as_secs_f64() {
                    self.gap = true;
                    return Some(Err(format!(
                        "{origin}: stale: the BMC's newest reading is {age:.0} s old (over {}); no energy from it",
                        format_period(self.max_age)
                    )));
                }
                self.last_time_s = Some(t);
                received_ns.saturating_sub((age * 1e9) as u64)
            }
            // Undated: measured before it was asked for, at the latest.
            None => asked_ns,
        };
        let value = match self.how.quantity() {
            Quantity::Power => ReadingValue::WindowAverage {
                watts: f.value,
                window: self.window,
            },
            q => {
                let step = if q == Quantity::EnergyJoules {
                    JOULE_STEP
                } else {
                    KWH_STEP
                };
                let unit = if q == Quantity::EnergyJoules {
                    1.0
                } else {
                    3.6e6
                };
                let raw = (f.value * unit / step).round() as u64;
                if f.reading_time_s.is_none() && self.last_raw == Some(raw) {
                    // Unchanged: no new reading (stale once it stays so past the bound).
                    return None;
                }
                self.last_raw = Some(raw);
                ReadingValue::Counter { raw }
            }
        };
        Some(Ok(Reading {
            channel: 0,
            value,
            measured_ns,
            received_ns,
        }))
    }
}

impl ReadingSource for RedfishMeter {
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
        // A request, and a new login and the request again where the session expired.
        3 * ANSWER_DEADLINE
    }
    fn stale_after(&self) -> Option<Duration> {
        Some(self.max_age)
    }
    fn poll(&mut self) -> Result<Vec<Reading>, EnergyError> {
        if let Some(first) = self.first.take() {
            return Ok(vec![first]);
        }
        let asked = crate::mono_ns();
        let answer = self.client.get(&self.path).map_err(EnergyError::Invalid)?;
        let received = crate::mono_ns();
        let f = figure(&answer.json, self.how).map_err(|w| {
            EnergyError::Invalid(format!(
                "{} {}: {w}; no figure from this answer",
                self.url, self.path
            ))
        })?;
        match self.reading(f, answer.bmc_now_s, asked, received) {
            Some(Ok(r)) => Ok(vec![r]),
            Some(Err(e)) => {
                self.errors.push(e);
                Ok(vec![])
            }
            None => Ok(vec![]),
        }
    }
    fn take_channel_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }
    fn take_gaps(&mut self) -> Vec<usize> {
        if std::mem::take(&mut self.gap) {
            vec![0]
        } else {
            vec![]
        }
    }
}

/// Opens one BMC as a polled source.
fn open_one(
    url: &PlatformUrl,
    req: &OpenRequest,
) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
    // Each message already names its fix (credentials, CA file, address).
    let mut meter = RedfishMeter::open(url).map_err(EnergyError::Invalid)?;
    let notes = std::mem::take(&mut meter.notes);
    let src = PolledSource::start(Box::new(meter))?;
    Ok((crate::opening::filter(Box::new(src), req.domains)?, notes))
}

/// The registry's entry point: every `--platform` BMC, each on a poller of its own.
pub(crate) fn open_mechanism(req: &OpenRequest) -> Opened {
    if req.platforms.is_empty() {
        return (
            Err(EnergyError::Unusable {
                mechanism: MECHANISM,
                reason: "no BMC named".into(),
                fix: "give --platform redfish://BMC[:PORT] (credentials in a file named by WATTIO_REDFISH_CREDENTIALS)".into(),
            }),
            vec![],
        );
    }
    let mut parts = Vec::new();
    let mut notes = Vec::new();
    for url in req.platforms {
        match open_one(url, req) {
            Ok((s, n)) => {
                parts.push(s);
                notes.extend(n);
            }
            Err(e) => return (Err(e), notes),
        }
    }
    let src = if parts.len() == 1 {
        parts.pop().map(Ok)
    } else {
        crate::CombinedSource::of(parts).map(|c| Ok(Box::new(c) as Box<dyn Source>))
    };
    (
        src.unwrap_or_else(|| Err(EnergyError::Invalid("no BMC opened".into()))),
        notes,
    )
}
