//! Per-model power profiles of SATA/SAS drives, which cannot report their power themselves:
//! shipped TOML files (`crates/devices/profiles/*.toml`, embedded in the binary), each figure
//! with its source (a datasheet's title and publisher, a paper's figure).
//!
//! A profile has three states in this order: active, idle, standby (the order the ATA reader
//! maps CHECK POWER MODE onto). A profile matches a drive when the drive's model string
//! contains one of its `models` (case-insensitive). A profile marked `class = true` is a
//! generic class, matched by `rotational` where no model profile matches, and labelled
//! generic; none is shipped until a class's figures have a source.
//!
//! File format (every field but `name`, `source` and the states' `max_w` optional):
//!
//! ```toml
//! name = "short-name"
//! description = "what drive"
//! models = ["ST3160827AS"]
//! source = "publisher, datasheet title, table"
//! class = false            # true: a generic class
//! rotational = true        # classes only: match spinning (true) or solid-state (false) disks
//! [[states]]               # three: active, idle, standby
//! name = "active"
//! max_w = 12.5
//! active_w = 12.0
//! idle_w = 7.5
//! non_operational = false
//! entry_latency_us = 0     # 0: not given by the source
//! exit_latency_us = 0
//! source = "the table row"
//! ```

use serde::Deserialize;

use crate::error::DeviceError;
use crate::figures::{FiguresSource, PowerFigures, PowerState};

/// The shipped profiles: (file name, text).
const SHIPPED: &[(&str, &str)] = &[
    (
        "seagate-barracuda-7200-7-ncq-160gb.toml",
        include_str!("../profiles/seagate-barracuda-7200-7-ncq-160gb.toml"),
    ),
    (
        "paper-2004-microdrive.toml",
        include_str!("../profiles/paper-2004-microdrive.toml"),
    ),
];

/// The most power a profile state may claim, W: more is a typo, not a drive.
const MAX_PLAUSIBLE_W: f64 = 100.0;
/// The longest latency a profile state may claim, µs (one minute).
const MAX_LATENCY_US: u64 = 60_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    name: String,
    max_w: f64,
    idle_w: Option<f64>,
    active_w: Option<f64>,
    #[serde(default)]
    non_operational: bool,
    #[serde(default)]
    entry_latency_us: u64,
    #[serde(default)]
    exit_latency_us: u64,
    source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    description: Option<String>,
    #[serde(default)]
    models: Vec<String>,
    source: String,
    #[serde(default)]
    class: bool,
    rotational: Option<bool>,
    states: Vec<StateFile>,
}

/// One drive profile: a model's (or a generic class's) power states with their sources.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveProfile {
    /// Its name (`seagate-barracuda-7200.7-ncq-160gb`).
    pub name: String,
    /// What drive it describes.
    pub description: String,
    /// Model substrings it matches.
    pub models: Vec<String>,
    /// Where its figures come from.
    pub source: String,
    /// A generic class rather than one model.
    pub class: bool,
    /// For a class: the `rotational` value it matches.
    pub rotational: Option<bool>,
    /// Active, idle, standby.
    pub states: Vec<PowerState>,
    /// Each state's own source line, where the file gives one.
    pub state_sources: Vec<Option<String>>,
}

impl DriveProfile {
    /// Its figures, labelled with the profile (or the generic class) and its source.
    pub fn figures(&self) -> PowerFigures {
        let source = if self.class {
            FiguresSource::GenericClass {
                class: self.description.clone(),
                source: self.source.clone(),
            }
        } else {
            FiguresSource::Profile {
                name: self.name.clone(),
                source: self.source.clone(),
            }
        };
        PowerFigures {
            states: self.states.clone(),
            source,
        }
    }

    /// Whether it describes drive model `model`.
    pub fn matches_model(&self, model: &str) -> bool {
        let model = model.to_ascii_lowercase();
        self.models
            .iter()
            .any(|m| !m.is_empty() && model.contains(&m.to_ascii_lowercase()))
    }
}

/// The 1-based line of byte `offset` of `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn profile_error(file: &str, line: usize, what: impl Into<String>) -> DeviceError {
    DeviceError::Profile {
        file: file.to_string(),
        line,
        what: what.into(),
    }
}

/// The line of `key = ` in `text` at or after the `[[states]]` number `state` (for errors).
fn line_of_state(text: &str, state: usize) -> usize {
    text.match_indices("[[states]]")
        .nth(state)
        .map(|(at, _)| line_of(text, at))
        .unwrap_or(1)
}

fn check_watts(file: &str, line: usize, what: &str, w: f64) -> Result<(), DeviceError> {
    if !(0.0..=MAX_PLAUSIBLE_W).contains(&w) {
        return Err(profile_error(
            file,
            line,
            format!("{what} = {w} W is not a drive's power (0 to {MAX_PLAUSIBLE_W} W)"),
        ));
    }
    Ok(())
}

/// Parses profile `file` (its name, for errors) from `text`; a malformed profile is one line
/// naming the file and the line.
pub fn parse_profile(file: &str, text: &str) -> Result<DriveProfile, DeviceError> {
    let parsed: ProfileFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(1);
        profile_error(file, line, e.message().replace('\n', " "))
    })?;
    if parsed.states.len() != 3 {
        return Err(profile_error(
            file,
            line_of_state(text, parsed.states.len().min(3)),
            format!(
                "{} [[states]]; a drive profile has three: active, idle, standby",
                parsed.states.len()
            ),
        ));
    }
    let mut states = Vec::new();
    let mut sources = Vec::new();
    for (i, s) in parsed.states.into_iter().enumerate() {
        let line = line_of_state(text, i);
        check_watts(file, line, "max_w", s.max_w)?;
        for (what, w) in [("idle_w", s.idle_w), ("active_w", s.active_w)] {
            if let Some(w) = w {
                check_watts(file, line, what, w)?;
                if w > s.max_w {
                    return Err(profile_error(
                        file,
                        line,
                        format!("{what} = {w} W is above max_w = {} W", s.max_w),
                    ));
                }
            }
        }
        if s.entry_latency_us.max(s.exit_latency_us) > MAX_LATENCY_US {
            return Err(profile_error(
                file,
                line,
                "a latency over one minute is not a drive's",
            ));
        }
        states.push(PowerState {
            id: i as u8,
            name: s.name,
            max_w: s.max_w,
            idle_w: s.idle_w,
            active_w: s.active_w,
            non_operational: s.non_operational,
            entry_latency_us: s.entry_latency_us,
            exit_latency_us: s.exit_latency_us,
        });
        sources.push(s.source);
    }
    Ok(DriveProfile {
        description: parsed.description.unwrap_or_else(|| parsed.name.clone()),
        name: parsed.name,
        models: parsed.models,
        source: parsed.source,
        class: parsed.class,
        rotational: parsed.rotational,
        states,
        state_sources: sources,
    })
}

/// Every shipped profile.
pub fn shipped_profiles() -> Result<Vec<DriveProfile>, DeviceError> {
    SHIPPED.iter().map(|(f, t)| parse_profile(f, t)).collect()
}

/// The shipped profile named `name`.
pub fn profile_by_name(name: &str) -> Result<Option<DriveProfile>, DeviceError> {
    Ok(shipped_profiles()?.into_iter().find(|p| p.name == name))
}

/// The profile of a drive among `profiles`: the first model profile matching `model`, else the
/// first generic class matching `rotational`.
pub fn profile_among(
    profiles: &[DriveProfile],
    model: Option<&str>,
    rotational: bool,
) -> Option<DriveProfile> {
    let by_model = model.and_then(|m| profiles.iter().find(|p| !p.class && p.matches_model(m)));
    by_model
        .or_else(|| {
            profiles
                .iter()
                .find(|p| p.class && p.rotational == Some(rotational))
        })
        .cloned()
}

/// The shipped profile of a drive with `model` and `rotational`, if any.
pub fn profile_for(
    model: Option<&str>,
    rotational: bool,
) -> Result<Option<DriveProfile>, DeviceError> {
    Ok(profile_among(&shipped_profiles()?, model, rotational))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_profiles_parse_and_carry_their_sources() {
        let all = shipped_profiles().unwrap();
        assert!(all.len() >= 2);
        for p in &all {
            assert_eq!(p.states.len(), 3, "{}", p.name);
            assert!(!p.source.is_empty());
            assert!(
                p.states[2].non_operational,
                "{}: standby is non-operational",
                p.name
            );
        }
        let seagate = profile_for(Some("ST3160827AS"), true).unwrap().unwrap();
        assert_eq!(seagate.states[1].idle_w, Some(7.5));
        assert!(seagate
            .figures()
            .source
            .label()
            .contains("Barracuda 7200.7"));
        assert!(profile_for(Some("WDC WD40EFRX-68N32N0"), true)
            .unwrap()
            .is_none());
        let micro = profile_by_name("paper-2004-microdrive").unwrap().unwrap();
        assert_eq!(micro.states[2].max_w, 0.08);
    }

    #[test]
    fn classes_match_by_rotational_after_models() {
        let class = parse_profile(
            "c.toml",
            "name = \"c\"\nsource = \"s\"\nclass = true\nrotational = false\n\
             [[states]]\nname = \"a\"\nmax_w = 3.0\n[[states]]\nname = \"i\"\nmax_w = 1.0\n\
             [[states]]\nname = \"s\"\nmax_w = 0.1\nnon_operational = true\n",
        )
        .unwrap();
        let all = [class];
        assert!(profile_among(&all, Some("X"), true).is_none());
        let p = profile_among(&all, Some("X"), false).unwrap();
        assert!(p.figures().source.label().starts_with("generic class"));
    }

    #[test]
    fn malformed_profiles_name_the_line() {
        let e =
            parse_profile("bad.toml", "name = \"x\"\nsource = \"s\"\nmodels = [1\n").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("bad.toml:3:") && !s.contains('\n'), "{s}");
        let text = "name = \"x\"\nsource = \"s\"\n[[states]]\nname = \"a\"\nmax_w = 5.0\n\
                    [[states]]\nname = \"i\"\nmax_w = 500.0\n[[states]]\nname = \"s\"\nmax_w = 0.1\n";
        let s = parse_profile("w.toml", text).unwrap_err().to_string();
        assert!(s.starts_with("w.toml:6:") && s.contains("500"), "{s}");
        let s = parse_profile("n.toml", "name = \"x\"\nsource = \"s\"\nstates = []\n")
            .unwrap_err()
            .to_string();
        assert!(s.contains("three"), "{s}");
    }
}
