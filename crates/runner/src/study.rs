//! A study's directory: its plan on disk (`study.json`), what a fresh start and a resume may
//! do with it, and how a study ended.

use std::io;
use std::path::Path;

pub use wattio_results::{StudyManifest, MANIFEST_FILE};

/// Why a study cannot start or resume in a directory. Each message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("{dir} holds an unfinished {study} study (started by `{command}`): continue it with --resume {dir}, or give another output directory")]
    Unfinished {
        dir: String,
        study: String,
        command: String,
    },
    #[error("nothing to resume in {dir}: it has no {MANIFEST_FILE} (a study writes one when it starts); start a new study there with -o {dir}")]
    NothingToResume { dir: String },
    #[error("{dir} holds a {found} study, not a {wanted} one: resume it with {found}")]
    OtherStudy {
        dir: String,
        found: String,
        wanted: String,
    },
    #[error("{dir} was started with another plan ({differences}): resume with the options it was started with, `{command}`, plus --resume {dir}")]
    PlanDiffers {
        dir: String,
        differences: String,
        command: String,
    },
    #[error("{path}: {why}")]
    Unreadable { path: String, why: String },
    #[error("cannot write {path}: {source}; check the directory exists and is writable")]
    Io { path: String, source: io::Error },
}

/// How a study ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StudyEnd<T> {
    /// Every run of the plan is done.
    Complete(T),
    /// Cancelled: `kept` of `total` runs are in the result files.
    Interrupted { kept: usize, total: usize },
}

/// "runs: 3 there, 5 now; sizes: …" for the keys where two plans differ.
fn differences(old: &serde_json::Value, new: &serde_json::Value) -> String {
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        return format!("{old} there, {new} now");
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&serde_json::Value>| v.map_or("nothing".to_string(), |v| v.to_string());
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: {} there, {} now", show(a.get(k)), show(b.get(k))))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `study.json` in `dir`, if there is one.
pub fn read_manifest(dir: &Path) -> Result<Option<StudyManifest>, StudyError> {
    let path = dir.join(MANIFEST_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StudyError::Unreadable {
                path: path.display().to_string(),
                why: format!(
                    "not a study manifest ({e}); remove it or choose another output directory"
                ),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StudyError::Io {
            path: path.display().to_string(),
            source: e,
        }),
    }
}

/// Writes `m` as `dir/study.json` (atomically: `wattio_files::write_atomically`).
pub fn write_manifest(dir: &Path, m: &StudyManifest) -> Result<(), StudyError> {
    let path = dir.join(MANIFEST_FILE);
    let text = serde_json::to_string_pretty(m).expect("a manifest always serialises");
    std::fs::create_dir_all(dir)
        .and_then(|_| {
            wattio_files::write_atomically(&path, |w| w.write_all((text + "\n").as_bytes()))
                .map_err(io::Error::from)
        })
        .map_err(|source| StudyError::Io {
            path: path.display().to_string(),
            source,
        })
}

/// Records in `dir/study.json` that every run is done (keeping the command that started it).
pub fn mark_complete(dir: &Path) -> Result<(), StudyError> {
    match read_manifest(dir)? {
        Some(m) => write_manifest(
            dir,
            &StudyManifest {
                complete: true,
                ..m
            },
        ),
        None => Err(StudyError::NothingToResume {
            dir: dir.display().to_string(),
        }),
    }
}

/// Claims `dir` for the study `m` describes, whose runs go to the files `results` (names in
/// `dir`).
///
/// A fresh start (`resume == false`) refuses a directory holding an unfinished study with
/// runs kept (they would be overwritten) and writes `m`. A resume needs a `study.json` of the
/// same study with the same plan, and keeps it.
pub fn open_study_dir(
    dir: &Path,
    m: &StudyManifest,
    resume: bool,
    results: &[&str],
) -> Result<(), StudyError> {
    check_study_dir(dir, m, resume, results)?;
    if resume {
        Ok(())
    } else {
        write_manifest(dir, m)
    }
}

/// What [`open_study_dir`] checks, without writing anything.
pub fn check_study_dir(
    dir: &Path,
    m: &StudyManifest,
    resume: bool,
    results: &[&str],
) -> Result<(), StudyError> {
    let shown = dir.display().to_string();
    let old = read_manifest(dir)?;
    if !resume {
        // A study stopped before its first run (a failed build, a failed warm-up) kept
        // nothing worth refusing for.
        let has_runs = || {
            results
                .iter()
                .any(|f| std::fs::metadata(dir.join(f)).is_ok_and(|md| md.len() > 0))
        };
        if let Some(o) = old.filter(|o| !o.complete && has_runs()) {
            return Err(StudyError::Unfinished {
                dir: shown,
                study: o.study,
                command: o.command,
            });
        }
        return Ok(());
    }
    let Some(o) = old else {
        return Err(StudyError::NothingToResume { dir: shown });
    };
    if o.study != m.study {
        return Err(StudyError::OtherStudy {
            dir: shown,
            found: o.study,
            wanted: m.study.clone(),
        });
    }
    if o.plan != m.plan || o.total_runs != m.total_runs {
        return Err(StudyError::PlanDiffers {
            dir: shown,
            differences: differences(&o.plan, &m.plan),
            command: o.command,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(runs: u32) -> StudyManifest {
        StudyManifest {
            study: "wattio iobench".into(),
            command: "wattio iobench --runs 3".into(),
            plan: json!({"runs": runs, "sizes": ["tiny"]}),
            total_runs: 6,
            complete: false,
        }
    }

    #[test]
    fn a_fresh_start_refuses_an_unfinished_study_and_replaces_a_finished_one() {
        let d = tempfile::tempdir().unwrap();
        open_study_dir(d.path(), &manifest(3), false, &["r.csv"]).unwrap();
        // No run kept yet: nothing to protect.
        open_study_dir(d.path(), &manifest(3), false, &["r.csv"]).unwrap();
        std::fs::write(d.path().join("r.csv"), "a\n1\n").unwrap();
        let e = open_study_dir(d.path(), &manifest(3), false, &["r.csv"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unfinished wattio iobench study") && e.contains("--resume"),
            "{e}"
        );
        let mut done = manifest(3);
        done.complete = true;
        write_manifest(d.path(), &done).unwrap();
        open_study_dir(d.path(), &manifest(5), false, &["r.csv"]).unwrap();
        assert_eq!(read_manifest(d.path()).unwrap().unwrap(), manifest(5));
    }

    #[test]
    fn a_resume_needs_the_same_study_and_plan() {
        let d = tempfile::tempdir().unwrap();
        let e = open_study_dir(d.path(), &manifest(3), true, &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("nothing to resume in"), "{e}");
        open_study_dir(d.path(), &manifest(3), false, &[]).unwrap();
        open_study_dir(d.path(), &manifest(3), true, &[]).unwrap();
        let e = open_study_dir(d.path(), &manifest(5), true, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(runs: 3 there, 5 now)") && e.contains("`wattio iobench --runs 3`"),
            "{e}"
        );
        let mut other = manifest(3);
        other.study = "wattio overhead".into();
        let e = open_study_dir(d.path(), &other, true, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds a wattio iobench study"), "{e}");
        std::fs::write(d.path().join(MANIFEST_FILE), "{").unwrap();
        let e = open_study_dir(d.path(), &manifest(3), true, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a study manifest"), "{e}");
    }
}
