//! Per-model power profiles of SATA/SAS drives, which cannot report their power themselves:
//! shipped TOML files (`crates/devices/profiles/*.toml`, embedded in the binary), each figure
//! with its source (a datasheet's title and publisher, a paper's figure).
//!
//! A profile has three states in this order: active, idle, standby (the order the ATA reader
//! maps CHECK POWER MODE onto). A profile matches a drive when the drive's model string
//! contains one of its `models` (case-insensitive).
//!
//! A drive no profile describes gets a generic class, labelled as such: each class is the
//! ENVELOPE of the shipped profiles of its `group` (per state, the greatest `max_w` and the least
//! `idle_w`; no active power), so every class figure is one a datasheet states. A class needs
//! two sourced members. The kernel says whether a disk spins (`queue/rotational`) but not its
//! size, so a spinning disk gets the envelope of both HDD classes and a solid-state one the SATA
//! SSD class; the 2.5- and 3.5-inch classes are there by name ([`generic_class`]).
//!
//! File format (every field but `name`, `source` and the states' `max_w` optional):
//!
//! ```toml
//! name = "short-name"
//! description = "what drive"
//! models = ["ST3160827AS"]
//! source = "publisher, datasheet title, table"
//! group = "3.5-inch HDD"   # the class it bounds: "3.5-inch HDD", "2.5-inch HDD", "SATA SSD"
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
    (
        "seagate-db35-4-st3250310cs.toml",
        include_str!("../profiles/seagate-db35-4-st3250310cs.toml"),
    ),
    (
        "seagate-laptop-ultrathin-st320lt030.toml",
        include_str!("../profiles/seagate-laptop-ultrathin-st320lt030.toml"),
    ),
    (
        "hitachi-travelstar-5k320-hts543212l9a300.toml",
        include_str!("../profiles/hitachi-travelstar-5k320-hts543212l9a300.toml"),
    ),
    (
        "intel-ssd-dc-s4500.toml",
        include_str!("../profiles/intel-ssd-dc-s4500.toml"),
    ),
    (
        "intel-ssd-dc-s3700.toml",
        include_str!("../profiles/intel-ssd-dc-s3700.toml"),
    ),
    (
        "intel-ssd-e5410s.toml",
        include_str!("../profiles/intel-ssd-e5410s.toml"),
    ),
];

/// The 3.5-inch hard-disk class (a `group` of the profile files).
pub const CLASS_HDD_35: &str = "3.5-inch HDD";
/// The 2.5-inch hard-disk class.
pub const CLASS_HDD_25: &str = "2.5-inch HDD";
/// The SATA solid-state drive class.
pub const CLASS_SATA_SSD: &str = "SATA SSD";
/// The class of a spinning disk of unknown size: the envelope of both HDD classes.
pub const CLASS_HDD_ANY: &str = "HDD, 2.5- or 3.5-inch (size not known)";

/// The groups a profile file may name, and whether their class matches spinning disks (`None`:
/// only by name).
const GROUPS: &[(&str, Option<bool>)] = &[
    (CLASS_HDD_35, None),
    (CLASS_HDD_25, None),
    (CLASS_SATA_SSD, Some(false)),
];

/// The fewest sourced profiles a class is built from.
const MIN_CLASS_MEMBERS: usize = 2;

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
    group: Option<String>,
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
    /// For a class: the `rotational` value it matches (`None`: chosen only by name).
    pub rotational: Option<bool>,
    /// For a model profile: the class it bounds (`3.5-inch HDD`, `2.5-inch HDD`, `SATA SSD`).
    pub group: Option<String>,
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
    if let Some(g) = parsed.group.as_deref() {
        if !GROUPS.iter().any(|(name, _)| *name == g) {
            let names: Vec<&str> = GROUPS.iter().map(|(name, _)| *name).collect();
            return Err(profile_error(
                file,
                text.find("group").map(|at| line_of(text, at)).unwrap_or(1),
                format!("group = {g:?} is not a class; use one of {names:?}"),
            ));
        }
    }
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
        class: false,
        rotational: None,
        group: parsed.group,
        states,
        state_sources: sources,
    })
}

/// Every shipped model profile, then the generic classes built from them.
pub fn shipped_profiles() -> Result<Vec<DriveProfile>, DeviceError> {
    let mut all = SHIPPED
        .iter()
        .map(|(f, t)| parse_profile(f, t))
        .collect::<Result<Vec<_>, _>>()?;
    let classes = generic_classes(&all);
    all.extend(classes);
    Ok(all)
}

/// The envelope of `members` (three states each): per state, the greatest `max_w` and the least
/// `idle_w` (none where a member gives none: the lower bound is then 0); no active power, and
/// latencies "not given", since no one member's are the class's.
fn envelope(
    class: &str,
    rotational: Option<bool>,
    members: &[&DriveProfile],
) -> Option<DriveProfile> {
    if members.len() < MIN_CLASS_MEMBERS {
        return None;
    }
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    let states = (0..3)
        .map(|i| {
            let at = |m: &&DriveProfile| m.states[i].clone();
            let all: Vec<PowerState> = members.iter().map(at).collect();
            PowerState {
                id: i as u8,
                name: all[0].name.clone(),
                max_w: all.iter().map(|s| s.max_w).fold(0.0, f64::max),
                idle_w: all
                    .iter()
                    .map(|s| s.idle_w)
                    .collect::<Option<Vec<f64>>>()
                    .map(|v| v.into_iter().fold(f64::INFINITY, f64::min)),
                active_w: None,
                non_operational: all.iter().any(|s| s.non_operational),
                entry_latency_us: 0,
                exit_latency_us: 0,
            }
        })
        .collect();
    Some(DriveProfile {
        name: format!("class {class}"),
        description: class.to_string(),
        models: Vec::new(),
        source: format!(
            "envelope of the shipped profiles: {} (per state the greatest max, the least idle)",
            names.join(", ")
        ),
        class: true,
        rotational,
        group: None,
        states,
        state_sources: vec![None; 3],
    })
}

/// The generic classes built from `profiles`: one per group with at least two members, and the
/// size-unknown HDD class over both HDD groups. A group with fewer members ships no class.
pub fn generic_classes(profiles: &[DriveProfile]) -> Vec<DriveProfile> {
    let in_groups = |groups: &[&str]| -> Vec<&DriveProfile> {
        profiles
            .iter()
            .filter(|p| !p.class && p.group.as_deref().is_some_and(|g| groups.contains(&g)))
            .collect()
    };
    let mut classes: Vec<DriveProfile> = GROUPS
        .iter()
        .filter_map(|(g, rotational)| envelope(g, *rotational, &in_groups(&[g])))
        .collect();
    let both = [CLASS_HDD_35, CLASS_HDD_25];
    let every_hdd_class_built = both
        .iter()
        .all(|g| classes.iter().any(|c| c.description == *g));
    if every_hdd_class_built {
        classes.extend(envelope(CLASS_HDD_ANY, Some(true), &in_groups(&both)));
    }
    classes
}

/// The shipped generic class named `class` ([`CLASS_HDD_35`], …), if it is built.
pub fn generic_class(class: &str) -> Result<Option<DriveProfile>, DeviceError> {
    Ok(shipped_profiles()?
        .into_iter()
        .find(|p| p.class && p.description == class))
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
        let micro = profile_by_name("paper-2004-microdrive").unwrap().unwrap();
        assert_eq!(micro.states[2].max_w, 0.08);
    }

    fn member(name: &str, group: &str, maxes: [f64; 3], idles: [Option<f64>; 3]) -> DriveProfile {
        let mut text = format!("name = \"{name}\"\nsource = \"s\"\ngroup = \"{group}\"\n");
        for (i, state) in ["active", "idle", "standby"].iter().enumerate() {
            text += &format!("[[states]]\nname = \"{state}\"\nmax_w = {}\n", maxes[i]);
            if let Some(w) = idles[i] {
                text += &format!("idle_w = {w}\n");
            }
            text += &format!("non_operational = {}\n", i == 2);
        }
        parse_profile(&format!("{name}.toml"), &text).unwrap()
    }

    #[test]
    fn a_class_is_the_envelope_of_two_or_more_members_and_matches_after_models() {
        let a = member(
            "a",
            CLASS_SATA_SSD,
            [3.0, 1.0, 1.0],
            [Some(1.0), Some(1.0), None],
        );
        let b = member(
            "b",
            CLASS_SATA_SSD,
            [5.0, 0.5, 0.5],
            [Some(0.5), Some(0.5), None],
        );
        let lone = member("c", CLASS_HDD_35, [9.0, 5.0, 1.0], [Some(1.0); 3]);
        let classes = generic_classes(&[a.clone(), b, lone.clone()]);
        // One SSD class; the lone 3.5-inch member makes no class, so no size-unknown HDD class.
        assert_eq!(classes.len(), 1);
        let ssd = &classes[0];
        assert_eq!(ssd.description, CLASS_SATA_SSD);
        let maxes: Vec<f64> = ssd.states.iter().map(|s| s.max_w).collect();
        let idles: Vec<Option<f64>> = ssd.states.iter().map(|s| s.idle_w).collect();
        assert_eq!(maxes, [5.0, 1.0, 1.0]);
        assert_eq!(idles, [Some(0.5), Some(0.5), None]);
        assert!(ssd.states[2].non_operational && ssd.states.iter().all(|s| s.active_w.is_none()));
        let label = ssd.figures().source.label();
        assert!(
            label.starts_with("generic class SATA SSD (envelope of the shipped profiles: a, b"),
            "{label}"
        );
        let all = [a, lone, ssd.clone()];
        assert!(profile_among(&all, Some("X"), true).is_none());
        assert_eq!(
            profile_among(&all, Some("X"), false).unwrap().name,
            "class SATA SSD"
        );
        let e = parse_profile(
            "g.toml",
            "name = \"x\"\nsource = \"s\"\ngroup = \"tape\"\nstates = []\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("g.toml:3:") && e.contains("not a class"),
            "{e}"
        );
    }

    #[test]
    fn the_shipped_classes_are_the_envelopes_of_their_datasheets() {
        // By hand from the TOML files: 3.5-inch: Barracuda 7200.7 (12.5/7.5, 7.5/7.5, 1.0/1.0) and
        // DB35.4 (7.97/5.33, 5.33/5.33, 1.06/1.06); 2.5-inch: Laptop Ultrathin (1.70/0.47,
        // 1.10/0.47, 0.18/0.18) and Travelstar 5K320 (2.2/0.55, 1.7/0.55, 0.2/0.1); SATA SSD:
        // S4500 (5.6/1.1, 1.1/1.1, 1.1/-), S3700 (6.0/0.65, 0.65/0.65, 0.65/-), E 5410s
        // (2.2/0.6, 0.6/0.6, 0.6/-). Each state: (max, idle).
        let expect = [
            (
                CLASS_HDD_35,
                [(12.5, Some(5.33)), (7.5, Some(5.33)), (1.06, Some(1.0))],
            ),
            (
                CLASS_HDD_25,
                [(2.2, Some(0.47)), (1.7, Some(0.47)), (0.2, Some(0.1))],
            ),
            (
                CLASS_SATA_SSD,
                [(6.0, Some(0.6)), (1.1, Some(0.6)), (1.1, None)],
            ),
            (
                CLASS_HDD_ANY,
                [(12.5, Some(0.47)), (7.5, Some(0.47)), (1.06, Some(0.1))],
            ),
        ];
        for (class, states) in expect {
            let c = generic_class(class).unwrap().unwrap();
            let got: Vec<(f64, Option<f64>)> =
                c.states.iter().map(|s| (s.max_w, s.idle_w)).collect();
            assert_eq!(got, states, "{class}");
        }
        let hdd = profile_for(Some("WDC WD40EFRX-68N32N0"), true)
            .unwrap()
            .unwrap();
        assert_eq!(hdd.description, CLASS_HDD_ANY);
        let label = hdd.figures().source.label();
        for name in [
            "seagate-barracuda-7200.7-ncq-160gb",
            "seagate-db35.4-st3250310cs",
            "seagate-laptop-ultrathin-st320lt030",
            "hitachi-travelstar-5k320-hts543212l9a300",
        ] {
            assert!(label.contains(name), "{label}");
        }
        let ssd = profile_for(Some("Samsung SSD 870 EVO 1TB"), false)
            .unwrap()
            .unwrap();
        assert_eq!(ssd.description, CLASS_SATA_SSD);
        let by_model = profile_for(Some("Hitachi HTS543212L9A300"), true)
            .unwrap()
            .unwrap();
        assert_eq!(by_model.name, "hitachi-travelstar-5k320-hts543212l9a300");
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
