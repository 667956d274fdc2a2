//! The Redfish resources wattio reads, decoded from their JSON as DMTF's schemas lay them out
//! (DSP0268, the Redfish schema supplement; schema versions below), and the times in them.
//!
//! * `EnvironmentMetrics` v1 (v1.0 onwards; `EnergyJoules` since v1.2): `PowerWatts`,
//!   `EnergyJoules`, `EnergykWh`, each an excerpt of a `Sensor` (`Reading`, and
//!   `DataSourceUri` naming the full `Sensor` resource).
//! * `Sensor` v1 (`ReadingType` `Power`, `EnergyJoules` or `EnergykWh`; `Reading`;
//!   `ReadingTime`, v1.1, when the reading was taken; `SensingInterval`, an ISO 8601 duration;
//!   `Precision`, the number of significant decimal digits; `SensorResetTime`).
//! * `Power` v1 (deprecated in 2020 for `PowerSubsystem` and `EnvironmentMetrics`):
//!   `PowerControl[].PowerConsumedWatts`, with `PowerMetrics.IntervalInMin`, the window of
//!   its `AverageConsumedWatts`.
//! * `Chassis` v1: the links to those (`EnvironmentMetrics`, `Sensors`, `Power`), and
//!   `ChassisCollection`'s `Members`.

use serde_json::Value;
use std::time::Duration;

/// The `@odata.id` under `key` (`{"Power": {"@odata.id": "/redfish/v1/Chassis/1U/Power"}}`).
pub(crate) fn link(v: &Value, key: &str) -> Option<String> {
    v.get(key)?.get("@odata.id")?.as_str().map(str::to_string)
}

/// A collection's members' `@odata.id`s, at most `max`.
pub(crate) fn members(v: &Value, max: usize) -> Vec<String> {
    v.get("Members")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(|m| m.get("@odata.id")?.as_str().map(str::to_string))
                .take(max)
                .collect()
        })
        .unwrap_or_default()
}

/// What a figure is: a power or an energy counter, in its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// Watts.
    Power,
    /// Joules, cumulative.
    EnergyJoules,
    /// Kilowatt-hours, cumulative.
    EnergykWh,
}

impl Quantity {
    /// The property name in EnvironmentMetrics, and the Sensor's `ReadingType`.
    pub(crate) fn property(self) -> &'static str {
        match self {
            Quantity::Power => "PowerWatts",
            Quantity::EnergyJoules => "EnergyJoules",
            Quantity::EnergykWh => "EnergykWh",
        }
    }

    fn reading_type(self) -> &'static str {
        match self {
            Quantity::Power => "Power",
            Quantity::EnergyJoules => "EnergyJoules",
            Quantity::EnergykWh => "EnergykWh",
        }
    }

    /// The order wattio prefers: a joule counter is exact over any window; a power reading
    /// needs integrating; a kWh counter's steps are often 3.6 kJ or coarser.
    pub(crate) const PREFERRED: [Quantity; 3] =
        [Quantity::EnergyJoules, Quantity::Power, Quantity::EnergykWh];
}

/// One figure as a resource gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figure {
    pub value: f64,
    /// `ReadingTime`, in seconds since the Unix epoch on the BMC's clock, where given.
    pub reading_time_s: Option<f64>,
    /// `SensingInterval`, where given.
    pub interval: Option<Duration>,
    /// The smallest step the value shows (from `Precision`), in its unit, where given.
    pub step: Option<f64>,
}

impl Figure {
    fn bare(value: f64) -> Figure {
        Figure {
            value,
            reading_time_s: None,
            interval: None,
            step: None,
        }
    }
}

/// Why a resource gave no figure (shown as one line).
pub(crate) type Why = String;

/// `Reading` of a Sensor or of an excerpt: a finite number, not negative.
fn reading(v: &Value, what: &str) -> Result<f64, Why> {
    match v.get("Reading") {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(format!("{what}.Reading is {n}, not a power or energy")),
        },
        Some(Value::Null) | None => Err(format!("{what} has no Reading (null or absent)")),
        Some(other) => Err(format!("{what}.Reading is {other}, not a number")),
    }
}

/// EnvironmentMetrics' excerpt of `q` (`{"PowerWatts": {"Reading": 374.0, "DataSourceUri": …}}`):
/// the figure and the Sensor it comes from, where named. `None` when the property is absent.
pub(crate) fn environment_excerpt(
    v: &Value,
    q: Quantity,
) -> Option<Result<(Figure, Option<String>), Why>> {
    let excerpt = v.get(q.property())?;
    let source = excerpt
        .get("DataSourceUri")
        .and_then(Value::as_str)
        .map(str::to_string);
    Some(reading(excerpt, q.property()).map(|x| (Figure::bare(x), source)))
}

/// A Sensor resource of the quantity `q`: its reading, time, interval and precision.
pub(crate) fn sensor(v: &Value, q: Quantity) -> Result<Figure, Why> {
    let kind = v.get("ReadingType").and_then(Value::as_str);
    if kind.is_some_and(|k| k != q.reading_type()) {
        return Err(format!(
            "the Sensor's ReadingType is {}, not {}",
            kind.unwrap_or_default(),
            q.reading_type()
        ));
    }
    if let Some(state) = v.pointer("/Status/State").and_then(Value::as_str) {
        if !matches!(state, "Enabled" | "StandbyOffline" | "Quiesced") {
            return Err(format!("the Sensor's Status.State is {state}"));
        }
    }
    let value = reading(v, "Sensor")?;
    let reading_time_s = match v.get("ReadingTime").and_then(Value::as_str) {
        Some(t) => Some(parse_date_time(t).ok_or_else(|| {
            format!("the Sensor's ReadingTime {t:?} is not an ISO 8601 date and time")
        })?),
        None => None,
    };
    let interval = v
        .get("SensingInterval")
        .and_then(Value::as_str)
        .and_then(parse_duration)
        .filter(|d| !d.is_zero());
    // DSP0268 Sensor: `Precision` is the number of significant digits of the reading, so its
    // step is 10^(digits before the point − precision).
    let step = v
        .get("Precision")
        .and_then(Value::as_f64)
        .filter(|p| (1.0..=15.0).contains(p))
        .map(|p| significant_step(value, p as i32));
    Ok(Figure {
        value,
        reading_time_s,
        interval,
        step,
    })
}

/// The step of a reading of `value` given to `digits` significant digits.
fn significant_step(value: f64, digits: i32) -> f64 {
    let magnitude = if value.abs() > 0.0 {
        value.abs().log10().floor() as i32 + 1
    } else {
        1
    };
    10f64.powi(magnitude - digits)
}

/// Whether a Sensor in a chassis's `Sensors` collection is the chassis's own `q` (its
/// `ReadingType`, and a `PhysicalContext` of the chassis or none).
pub(crate) fn is_chassis_sensor(v: &Value, q: Quantity) -> bool {
    v.get("ReadingType").and_then(Value::as_str) == Some(q.reading_type())
        && matches!(
            v.get("PhysicalContext").and_then(Value::as_str),
            None | Some("Chassis") | Some("SystemBoard")
        )
}

/// The deprecated Power resource's first `PowerControl` entry with a `PowerConsumedWatts`, and
/// its `PowerMetrics.IntervalInMin`. `None` when no entry has one.
pub(crate) fn power_control(v: &Value) -> Option<Result<(Figure, Option<Duration>), Why>> {
    let entries = v.get("PowerControl")?.as_array()?;
    let entry = entries
        .iter()
        .find(|e| e.get("PowerConsumedWatts").is_some())?;
    let watts = match entry.get("PowerConsumedWatts") {
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => x,
            _ => return Some(Err(format!("PowerConsumedWatts is {n}, not a power"))),
        },
        Some(other) => return Some(Err(format!("PowerConsumedWatts is {other}, not a number"))),
        None => return None,
    };
    let interval = entry
        .pointer("/PowerMetrics/IntervalInMin")
        .and_then(Value::as_f64)
        .filter(|m| *m > 0.0 && *m < 1e6)
        .map(|m| Duration::from_secs_f64(m * 60.0));
    Some(Ok((Figure::bare(watts), interval)))
}

/// Seconds since the Unix epoch of an ISO 8601 / RFC 3339 date and time
/// (`2026-12-07T14:00:00Z`, `2026-12-07T15:00:00.250+01:00`), as Redfish writes `ReadingTime`.
pub(crate) fn parse_date_time(s: &str) -> Option<f64> {
    let s = s.trim();
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let (y, mo, da): (i64, u32, u32) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let (clock, offset_s) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0i64)
    } else {
        let i = time.rfind(['+', '-'])?;
        let (c, off) = time.split_at(i);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':').unwrap_or((&off[1..], "0"));
        (
            c,
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60),
        )
    };
    let mut c = clock.splitn(3, ':');
    let (h, mi): (i64, i64) = (c.next()?.parse().ok()?, c.next()?.parse().ok()?);
    let sec: f64 = c.next().unwrap_or("0").parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || sec >= 61.0 {
        return None;
    }
    let days = days_from_civil(y, mo, da);
    Some((days * 86_400 + h * 3600 + mi * 60 - offset_s) as f64 + sec)
}

/// Seconds since the Unix epoch of an HTTP `Date` header (RFC 9110's IMF-fixdate,
/// `Mon, 07 Dec 2026 14:25:20 GMT`): the BMC's own clock when it answered.
pub(crate) fn parse_http_date(s: &str) -> Option<f64> {
    let mut w = s.split_whitespace().skip(1);
    let day: u32 = w.next()?.parse().ok()?;
    let month = w.next()?;
    let year: i64 = w.next()?.parse().ok()?;
    let clock = w.next()?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mo = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(month))? as u32 + 1;
    parse_date_time(&format!("{year:04}-{mo:02}-{day:02}T{clock}Z"))
}

/// An ISO 8601 duration as Redfish writes `SensingInterval` (`PT30S`, `PT1M`, `PT0.5S`,
/// `P1DT2H`).
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let rest = s.trim().strip_prefix(['P', 'p'])?;
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((d, t)) => (d, t),
        None => (rest, ""),
    };
    let mut total = 0.0;
    let mut add = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut num = String::new();
        for ch in part.chars() {
            if ch.is_ascii_digit() || ch == '.' {
                num.push(ch);
            } else {
                let (_, scale) = units.iter().find(|(u, _)| u.eq_ignore_ascii_case(&ch))?;
                total += num.parse::<f64>().ok()? * scale;
                num.clear();
            }
        }
        num.is_empty().then_some(())
    };
    add(days, &[('D', 86_400.0)])?;
    add(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {

    #[test]
    fn precision_is_significant_digits() {
        // 6,129,360,000 J to 6 significant digits: steps of 10 kJ.
        assert_eq!(super::significant_step(6_129_360_000.0, 6), 10_000.0);
        // 245.3 W to 4 digits: 0.1 W.
        assert!((super::significant_step(245.3, 4) - 0.1).abs() < 1e-12);
        assert_eq!(super::significant_step(0.0, 3), 0.01);
    }
    use super::*;
    use serde_json::json;

    // Samples written from DSP0268's schemas (EnvironmentMetrics v1.3, Sensor v1.7, Power
    // v1.7, Chassis v1.25), with the values a two-socket server might give.

    #[test]
    fn environment_metrics_give_each_excerpt_and_its_sensor() {
        let env = json!({
            "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
            "@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics",
            "Id": "EnvironmentMetrics", "Name": "Chassis Environment Metrics",
            "TemperatureCelsius": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/Temp", "Reading": 39},
            "PowerWatts": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalPower", "Reading": 374.5},
            "EnergykWh": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalEnergykWh", "Reading": 1702.6},
            "EnergyJoules": {"Reading": 6129360000.0}
        });
        let (f, src) = environment_excerpt(&env, Quantity::Power).unwrap().unwrap();
        assert_eq!(f.value, 374.5);
        assert_eq!(
            src.as_deref(),
            Some("/redfish/v1/Chassis/1U/Sensors/TotalPower")
        );
        let (f, src) = environment_excerpt(&env, Quantity::EnergyJoules)
            .unwrap()
            .unwrap();
        assert_eq!(f.value, 6129360000.0);
        assert_eq!(src, None);
        assert_eq!(
            environment_excerpt(&env, Quantity::EnergykWh)
                .unwrap()
                .unwrap()
                .0
                .value,
            1702.6
        );
        let null = json!({"PowerWatts": {"Reading": null}});
        assert!(environment_excerpt(&null, Quantity::Power)
            .unwrap()
            .is_err());
        let text = json!({"PowerWatts": {"Reading": "374"}});
        assert!(environment_excerpt(&text, Quantity::Power)
            .unwrap()
            .unwrap_err()
            .contains("not a number"));
        assert!(environment_excerpt(&json!({}), Quantity::Power).is_none());
    }

    #[test]
    fn a_sensor_gives_its_reading_time_interval_and_precision() {
        let s = json!({
            "@odata.type": "#Sensor.v1_7_0.Sensor",
            "@odata.id": "/redfish/v1/Chassis/1U/Sensors/TotalPower",
            "Id": "TotalPower", "Name": "Chassis Input Power",
            "ReadingType": "Power", "ReadingUnits": "W",
            "Reading": 374.5, "ReadingTime": "2026-12-07T14:00:30+01:00",
            "SensingInterval": "PT30S", "Precision": 4,
            "PhysicalContext": "Chassis",
            "Status": {"State": "Enabled", "Health": "OK"}
        });
        let f = sensor(&s, Quantity::Power).unwrap();
        assert_eq!(f.value, 374.5);
        assert_eq!(f.reading_time_s, Some(1_796_648_430.0));
        assert_eq!(f.interval, Some(Duration::from_secs(30)));
        // 4 significant digits of 374.5 W: steps of 0.1 W.
        assert!((f.step.unwrap() - 0.1).abs() < 1e-12, "{:?}", f.step);
        assert!(is_chassis_sensor(&s, Quantity::Power));
        assert!(!is_chassis_sensor(&s, Quantity::EnergyJoules));
        assert!(sensor(&s, Quantity::EnergyJoules)
            .unwrap_err()
            .contains("ReadingType"));
        let mut off = s.clone();
        off["Status"]["State"] = json!("Absent");
        assert!(sensor(&off, Quantity::Power)
            .unwrap_err()
            .contains("Absent"));
        let mut bad_time = s.clone();
        bad_time["ReadingTime"] = json!("yesterday");
        assert!(sensor(&bad_time, Quantity::Power)
            .unwrap_err()
            .contains("ISO 8601"));
        let psu = json!({"ReadingType": "Power", "PhysicalContext": "PowerSupply", "Reading": 180});
        assert!(!is_chassis_sensor(&psu, Quantity::Power));
    }

    #[test]
    fn the_deprecated_power_resource_gives_power_consumed_and_its_interval() {
        let p = json!({
            "@odata.type": "#Power.v1_7_1.Power",
            "@odata.id": "/redfish/v1/Chassis/1U/Power",
            "Id": "Power", "Name": "Power",
            "PowerControl": [{
                "@odata.id": "/redfish/v1/Chassis/1U/Power#/PowerControl/0",
                "MemberId": "0", "Name": "System Input Power",
                "PowerConsumedWatts": 344.0, "PowerCapacityWatts": 800,
                "PowerMetrics": {"IntervalInMin": 30, "MinConsumedWatts": 271, "MaxConsumedWatts": 489, "AverageConsumedWatts": 319}
            }]
        });
        let (f, interval) = power_control(&p).unwrap().unwrap();
        assert_eq!(f.value, 344.0);
        assert_eq!(interval, Some(Duration::from_secs(1800)));
        assert!(power_control(&json!({"PowerControl": []})).is_none());
        let neg = json!({"PowerControl": [{"PowerConsumedWatts": -3}]});
        assert!(power_control(&neg).unwrap().is_err());
    }

    #[test]
    fn chassis_links_and_collection_members() {
        let chassis = json!({
            "@odata.type": "#Chassis.v1_25_0.Chassis", "Id": "1U", "ChassisType": "RackMount",
            "EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/1U/EnvironmentMetrics"},
            "Power": {"@odata.id": "/redfish/v1/Chassis/1U/Power"},
            "Sensors": {"@odata.id": "/redfish/v1/Chassis/1U/Sensors"}
        });
        assert_eq!(
            link(&chassis, "Power").unwrap(),
            "/redfish/v1/Chassis/1U/Power"
        );
        assert_eq!(link(&chassis, "PowerSubsystem"), None);
        let coll = json!({
            "@odata.type": "#ChassisCollection.ChassisCollection",
            "Members@odata.count": 2,
            "Members": [{"@odata.id": "/redfish/v1/Chassis/1U"}, {"@odata.id": "/redfish/v1/Chassis/Blade1"}]
        });
        assert_eq!(
            members(&coll, 8),
            ["/redfish/v1/Chassis/1U", "/redfish/v1/Chassis/Blade1"]
        );
        assert_eq!(members(&coll, 1).len(), 1);
    }

    #[test]
    fn times_and_durations() {
        assert_eq!(parse_date_time("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_date_time("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        assert_eq!(
            parse_date_time("2026-12-07T14:00:00.250Z"),
            Some(1_796_652_000.25)
        );
        assert_eq!(
            parse_date_time("2026-12-07T09:00:00-05:00"),
            Some(1_796_652_000.0)
        );
        assert_eq!(parse_date_time("2026-13-07T09:00:00Z"), None);
        assert_eq!(
            parse_http_date("Mon, 07 Dec 2026 14:00:00 GMT"),
            Some(1_796_652_000.0)
        );
        assert_eq!(parse_duration("PT30S"), Some(Duration::from_secs(30)));
        assert_eq!(
            parse_duration("PT1M0.5S"),
            Some(Duration::from_millis(60_500))
        );
        assert_eq!(parse_duration("P1DT1H"), Some(Duration::from_secs(90_000)));
        assert_eq!(parse_duration("30"), None);
        assert_eq!(parse_duration("PT5X"), None);
    }
}
