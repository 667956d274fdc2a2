//! Device profiles as TOML data files; the schema is documented on [`Profile`].

use crate::device::{DeviceKind, DeviceSpec, IoModel, ModeId, ModeInfo, TransitionCost};
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

/// Built-in profiles, embedded so the binary works anywhere.
const BUILTIN: &[(&str, &str)] = &[
    ("paper-2004", include_str!("../profiles/paper-2004.toml")),
    (
        "laptop-hdd-wifi",
        include_str!("../profiles/laptop-hdd-wifi.toml"),
    ),
    (
        "laptop-nvme-wifi",
        include_str!("../profiles/laptop-nvme-wifi.toml"),
    ),
    (
        "laptop-hdd-lte",
        include_str!("../profiles/laptop-hdd-lte.toml"),
    ),
];

/// A loaded, validated device profile: a platform (base power), one storage device and one
/// network device, every number with its source.
///
/// Schema (all powers in watts, times in seconds, energies in joules, bandwidths in bytes/s):
///
/// ```toml
/// name = "paper-2004"
/// description = "..."
/// [platform]
/// base_power_w = 1.44            # everything except the two devices
/// source = "..."
/// [storage]                      # and [network], same shape
/// name = "Hitachi 1 GB microdrive"
/// source = "..."
/// default_timeout_s = 10.1       # optional: device's own policy is "up on demand, down after
///                                #  this idle time" (LTE tail); without it, storage uses an
///                                #  ABLE-like ladder and network stays in its lowest readable mode
/// [[storage.modes]]
/// name = "performance-idle"
/// power_w = 0.76
/// can_read = true                # default false
/// can_write = true               # default false
/// latency_s = 0.065              # I/O model, required when can_read or can_write
/// read_bytes_per_s = 1.3e6
/// write_bytes_per_s = 1.3e6
/// read_power_w = 1.3
/// write_power_w = 1.5
/// source = "..."
/// [[storage.transitions]]
/// from = "standby"
/// to = "performance-idle"
/// time_s = 0.82
/// energy_j = 0.9
/// source = "..."
/// ```
///
/// Errors name the file, the line and the field.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Profile {
    /// Profile name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Power of the rest of the machine, watts.
    pub base_power_w: f64,
    /// The local storage device.
    pub storage: DeviceSpec,
    /// The network device.
    pub network: DeviceSpec,
    /// Storage device's own idle timeout policy, if it has a simple one.
    pub storage_default_timeout_s: Option<f64>,
    /// Network device's own idle timeout policy (e.g. an LTE tail), if any.
    pub network_default_timeout_s: Option<f64>,
}

/// Why a profile could not be loaded; displays as `FILE:LINE: field `F`: problem (fix)`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct ProfileError {
    /// File name (or `builtin:NAME`).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and how to fix it.
    pub msg: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    #[serde(default)]
    description: String,
    platform: RawPlatform,
    storage: Spanned<RawDevice>,
    network: Spanned<RawDevice>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlatform {
    base_power_w: Spanned<f64>,
    #[serde(default)]
    #[allow(dead_code)]
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    source: String,
    #[serde(default)]
    default_timeout_s: Option<Spanned<f64>>,
    modes: Vec<Spanned<RawMode>>,
    #[serde(default)]
    transitions: Vec<Spanned<RawTransition>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMode {
    name: String,
    power_w: Spanned<f64>,
    #[serde(default)]
    can_read: bool,
    #[serde(default)]
    can_write: bool,
    latency_s: Option<Spanned<f64>>,
    read_bytes_per_s: Option<Spanned<f64>>,
    write_bytes_per_s: Option<Spanned<f64>>,
    read_power_w: Option<Spanned<f64>>,
    write_power_w: Option<Spanned<f64>>,
    #[serde(default)]
    #[allow(dead_code)]
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransition {
    from: Spanned<String>,
    to: Spanned<String>,
    time_s: Spanned<f64>,
    energy_j: Spanned<f64>,
    #[serde(default)]
    #[allow(dead_code)]
    source: String,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl Profile {
    /// Names of the built-in profiles.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// The TOML text of a built-in profile.
    pub fn builtin_text(name: &str) -> Option<&'static str> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        match Self::builtin_text(name) {
            Some(t) => Self::parse(t, &format!("builtin:{name}")),
            None => Err(ProfileError {
                file: name.to_string(),
                line: 0,
                msg: format!(
                    "no built-in profile `{name}` (choose one of: {}, or give a .toml file)",
                    Self::builtin_names().join(", ")
                ),
            }),
        }
    }

    /// A built-in profile name, or else a path to a TOML file.
    pub fn resolve(name_or_path: &str) -> Result<Profile, ProfileError> {
        if Self::builtin_text(name_or_path).is_some() {
            return Self::builtin(name_or_path);
        }
        let p = Path::new(name_or_path);
        if p.exists() || name_or_path.ends_with(".toml") {
            return Self::load(p);
        }
        Self::builtin(name_or_path)
    }

    /// Load and validate a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: file.clone(),
            line: 0,
            msg: format!("cannot read profile: {e} (check the path and permissions)"),
        })?;
        Self::parse(&text, &file)
    }

    /// Parse and validate profile text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        let err = |off: usize, msg: String| ProfileError {
            file: file.to_string(),
            line: line_of(text, off),
            msg,
        };
        let raw: RawProfile = toml::from_str(text).map_err(|e| {
            let off = e.span().map(|s| s.start).unwrap_or(0);
            err(off, e.message().trim().to_string())
        })?;
        let base = &raw.platform.base_power_w;
        if !(base.get_ref().is_finite() && *base.get_ref() >= 0.0) {
            return Err(err(
                base.span().start,
                "field `base_power_w`: must be a finite number ≥ 0".into(),
            ));
        }
        let storage = convert_device(&raw.storage, DeviceKind::Storage, "storage", &err)?;
        let network = convert_device(&raw.network, DeviceKind::Network, "network", &err)?;
        let timeout = |d: &Spanned<RawDevice>, sec: &str| -> Result<Option<f64>, ProfileError> {
            match &d.get_ref().default_timeout_s {
                None => Ok(None),
                Some(v) if v.get_ref().is_finite() && *v.get_ref() >= 0.0 => Ok(Some(*v.get_ref())),
                Some(v) => Err(err(
                    v.span().start,
                    format!("[{sec}] field `default_timeout_s`: must be a finite number ≥ 0"),
                )),
            }
        };
        Ok(Profile {
            name: raw.name.clone(),
            description: raw.description.clone(),
            base_power_w: *base.get_ref(),
            storage_default_timeout_s: timeout(&raw.storage, "storage")?,
            network_default_timeout_s: timeout(&raw.network, "network")?,
            storage,
            network,
        })
    }
}

fn convert_device(
    d: &Spanned<RawDevice>,
    kind: DeviceKind,
    sec: &str,
    err: &dyn Fn(usize, String) -> ProfileError,
) -> Result<DeviceSpec, ProfileError> {
    let raw = d.get_ref();
    let mut modes = Vec::new();
    for sm in &raw.modes {
        let m = sm.get_ref();
        let num = |v: &Spanned<f64>, f: &str, strictly_pos: bool| -> Result<f64, ProfileError> {
            let x = *v.get_ref();
            if !x.is_finite() || x < 0.0 || (strictly_pos && x == 0.0) {
                return Err(err(
                    v.span().start,
                    format!(
                        "[{sec}] mode `{}` field `{f}`: must be a finite number {}",
                        m.name,
                        if strictly_pos { "> 0" } else { "≥ 0" }
                    ),
                ));
            }
            Ok(x)
        };
        let power_w = num(&m.power_w, "power_w", false)?;
        let io = if m.can_read || m.can_write {
            let req = |v: &Option<Spanned<f64>>, f: &str, pos: bool| -> Result<f64, ProfileError> {
                match v {
                    Some(v) => num(v, f, pos),
                    None => Err(err(
                        sm.span().start,
                        format!("[{sec}] mode `{}`: missing field `{f}` (required when the mode can read or write)", m.name),
                    )),
                }
            };
            Some(IoModel {
                latency_s: req(&m.latency_s, "latency_s", false)?,
                read_bytes_per_s: req(&m.read_bytes_per_s, "read_bytes_per_s", true)?,
                write_bytes_per_s: req(&m.write_bytes_per_s, "write_bytes_per_s", true)?,
                read_power_w: req(&m.read_power_w, "read_power_w", false)?,
                write_power_w: req(&m.write_power_w, "write_power_w", false)?,
            })
        } else {
            None
        };
        if modes.iter().any(|x: &ModeInfo| x.name == m.name) {
            return Err(err(
                sm.span().start,
                format!("[{sec}] mode `{}` is defined twice (rename one)", m.name),
            ));
        }
        modes.push(ModeInfo {
            name: m.name.clone(),
            power_w,
            can_read: m.can_read,
            can_write: m.can_write,
            io,
        });
    }
    if modes.is_empty() {
        return Err(err(
            d.span().start,
            format!("[{sec}] has no modes (add [[{sec}.modes]] tables)"),
        ));
    }
    let mut transitions = Vec::new();
    for st in &raw.transitions {
        let t = st.get_ref();
        let find = |n: &Spanned<String>, f: &str| -> Result<ModeId, ProfileError> {
            modes.iter().position(|m| &m.name == n.get_ref()).map(ModeId).ok_or_else(|| {
                err(n.span().start, format!("[{sec}] transition field `{f}`: unknown mode `{}` (define it in [[{sec}.modes]])", n.get_ref()))
            })
        };
        let from = find(&t.from, "from")?;
        let to = find(&t.to, "to")?;
        if from == to {
            return Err(err(
                st.span().start,
                format!(
                    "[{sec}] transition from `{}` to itself (remove it)",
                    t.from.get_ref()
                ),
            ));
        }
        for (v, f) in [(&t.time_s, "time_s"), (&t.energy_j, "energy_j")] {
            if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) {
                return Err(err(
                    v.span().start,
                    format!("[{sec}] transition field `{f}`: must be a finite number ≥ 0"),
                ));
            }
        }
        transitions.push((
            from,
            to,
            TransitionCost {
                time_s: *t.time_s.get_ref(),
                energy_j: *t.energy_j.get_ref(),
            },
        ));
    }
    let spec = DeviceSpec {
        name: raw.name.clone(),
        kind,
        modes,
        transitions,
    };
    spec.validate()
        .map_err(|e| err(d.span().start, format!("[{sec}] {}", e.0)))?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_builtins_load() {
        for n in Profile::builtin_names() {
            let p = Profile::builtin(n).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.name, n);
        }
    }

    fn cost(time_s: f64, energy_j: f64) -> Option<TransitionCost> {
        Some(TransitionCost { time_s, energy_j })
    }

    #[test]
    fn paper_profile_has_figure_1_and_2_numbers() {
        let p = Profile::builtin("paper-2004").unwrap();
        assert_eq!(p.base_power_w, 1.44);
        let s = &p.storage;
        let pi = s.mode_by_name("performance-idle").unwrap();
        let lpi = s.mode_by_name("low-power-idle").unwrap();
        let sb = s.mode_by_name("standby").unwrap();
        assert_eq!(s.modes[pi.0].power_w, 0.76);
        assert_eq!(s.modes[lpi.0].power_w, 0.34);
        assert_eq!(s.modes[sb.0].power_w, 0.08);
        assert_eq!(s.high_mode(), pi);
        assert_eq!(s.transition(sb, pi), cost(0.82, 0.9));
        assert_eq!(s.transition(pi, sb), cost(0.32, 0.3));
        assert_eq!(s.transition(lpi, pi), cost(0.30, 0.31));
        assert_eq!(s.transition(pi, lpi), cost(0.16, 0.15));
        let n = &p.network;
        let cam = n.mode_by_name("cam").unwrap();
        let psm = n.mode_by_name("psm").unwrap();
        assert_eq!(n.modes[cam.0].power_w, 1.41);
        assert_eq!(n.modes[psm.0].power_w, 0.39);
        assert_eq!(n.high_mode(), cam);
        assert_eq!(n.low_readable_mode(), psm);
        assert_eq!(n.transition(psm, cam), cost(0.40, 0.51));
        assert_eq!(n.transition(cam, psm), cost(0.41, 0.53));
    }

    fn bad(text: &str) -> ProfileError {
        Profile::parse(text, "t.toml").expect_err("should fail")
    }

    const GOOD: &str = r#"name = "x"
[platform]
base_power_w = 1.0
[storage]
name = "d"
[[storage.modes]]
name = "on"
power_w = 1.0
can_read = true
can_write = true
latency_s = 0.01
read_bytes_per_s = 1e6
write_bytes_per_s = 1e6
read_power_w = 2.0
write_power_w = 2.0
[[storage.modes]]
name = "off"
power_w = 0.1
[[storage.transitions]]
from = "off"
to = "on"
time_s = 1.0
energy_j = 1.0
[network]
name = "n"
[[network.modes]]
name = "on"
power_w = 1.0
can_read = true
can_write = true
latency_s = 0.01
read_bytes_per_s = 1e6
write_bytes_per_s = 1e6
read_power_w = 2.0
write_power_w = 2.0
"#;

    #[test]
    fn good_minimal_profile_loads() {
        Profile::parse(GOOD, "t.toml").unwrap();
    }

    #[test]
    fn negative_power_names_line_and_field() {
        let e = bad(&GOOD.replace("power_w = 0.1", "power_w = -0.1"));
        assert_eq!(e.line, 18, "{e}");
        assert!(e.to_string().starts_with("t.toml:18: "), "{e}");
        assert!(e.msg.contains("power_w"), "{e}");
        assert!(e.msg.contains("`off`"), "{e}");
    }

    #[test]
    fn unknown_mode_in_transition_names_line() {
        let e = bad(&GOOD.replace("from = \"off\"", "from = \"sleep\""));
        assert_eq!(e.line, 20, "{e}");
        assert!(e.msg.contains("unknown mode `sleep`"), "{e}");
    }

    #[test]
    fn missing_io_field_is_reported() {
        let e = bad(&GOOD.replacen("read_power_w = 2.0\n", "", 1));
        assert!(e.msg.contains("missing field `read_power_w`"), "{e}");
        assert_eq!(e.line, 6, "{e}");
    }

    #[test]
    fn missing_transition_to_high_mode_is_reported() {
        let e = bad(&GOOD.replace("from = \"off\"\nto = \"on\"", "from = \"on\"\nto = \"off\""));
        assert!(
            e.msg.contains("no transition to the high-power mode"),
            "{e}"
        );
    }

    #[test]
    fn syntax_error_names_line() {
        let e = bad(&GOOD.replace("energy_j = 1.0", "energy_j = = 1.0"));
        assert_eq!(e.line, 23, "{e}");
    }

    #[test]
    fn unknown_field_is_rejected() {
        let e = bad(&GOOD.replace("power_w = 0.1", "power_w = 0.1\npowr = 3"));
        assert!(e.msg.contains("powr"), "{e}");
        assert_eq!(e.line, 19, "{e}");
    }

    #[test]
    fn unknown_builtin_lists_choices() {
        let e = Profile::resolve("nope").unwrap_err();
        assert!(e.msg.contains("paper-2004"), "{e}");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let e = Profile::resolve("/nonexistent/x.toml").unwrap_err();
        assert!(e.msg.contains("cannot read profile"), "{e}");
    }
}
