//! The paper's datasets (Di Tacchio et al., Table II), scaled.
//!
//! | Dataset | Files  | Total     | Mean size  | Std dev   |
//! |---------|--------|-----------|------------|-----------|
//! | small   | 20,000 | 1.94 GB   | 101.92 KB  | 29.06 KB  |
//! | medium  | 5,000  | 11.70 GB  | 2.40 MB    | 0.27 MB   |
//! | large   | 128    | 27.85 GB  | 222.78 MB  | 15.19 MB  |
//!
//! The table's totals only agree with count × mean in binary units (20,000 × 101.92 KiB =
//! 1.94 GiB), so KB/MB/GB are read as KiB/MiB/GiB. "mixed" is the union of the three.
//!
//! Scaling multiplies the **number of files** by the factor and keeps the size distribution,
//! because what the transfer tuners react to is file size relative to the BDP. Sizes are drawn
//! from a normal distribution with the table's mean and standard deviation, truncated at ±3 σ,
//! from a seeded generator, so the same scale and seed give byte-identical datasets. Contents are
//! pseudo-random (incompressible). Layout under `DIR`:
//!
//! ```text
//! DIR/small/s000001.bin …   DIR/small.tsv   (relative path <TAB> size, one line per file)
//! DIR/medium/m000001.bin …  DIR/medium.tsv
//! DIR/large/l000001.bin …   DIR/large.tsv
//! DIR/mixed/…               DIR/mixed.tsv   (hard links to the three above: no extra space)
//! ```
//!
//! File names are unique across datasets so tools that flatten paths (`wget -nd`, `nghttp -O`)
//! never collide. The manifest is written last: a dataset with a manifest is complete.

use crate::TestbedError;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use wattio_progress::Sink;
use wattio_stats::SplitMix64;

const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// One row of Table II.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shape {
    pub name: &'static str,
    /// File-name prefix, unique per dataset.
    pub prefix: char,
    pub files: usize,
    pub mean_bytes: f64,
    pub sd_bytes: f64,
}

/// Table II of the paper.
pub(crate) const TABLE_II: [Shape; 3] = [
    Shape {
        name: "small",
        prefix: 's',
        files: 20_000,
        mean_bytes: 101.92 * KIB,
        sd_bytes: 29.06 * KIB,
    },
    Shape {
        name: "medium",
        prefix: 'm',
        files: 5_000,
        mean_bytes: 2.40 * MIB,
        sd_bytes: 0.27 * MIB,
    },
    Shape {
        name: "large",
        prefix: 'l',
        files: 128,
        mean_bytes: 222.78 * MIB,
        sd_bytes: 15.19 * MIB,
    },
];

/// All dataset names, in the order they are generated.
pub const DATASET_NAMES: [&str; 4] = ["small", "medium", "large", "mixed"];

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetFile {
    /// Path relative to the dataset directory.
    pub path: String,
    pub size: u64,
}

/// Dataset draws over the workspace's one seeded generator ([`wattio_stats::SplitMix64`]):
/// sizes and filler bytes (not cryptographic).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(SplitMix64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(SplitMix64::new(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in (0, 1]: never 0, so `ln` below stays finite.
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Number of files of `shape` at `scale` (at least one).
pub(crate) fn scaled_count(shape: &Shape, scale: f64) -> usize {
    ((shape.files as f64 * scale).round() as usize).max(1)
}

/// The file list of one base dataset at `scale` with `seed`: deterministic.
pub(crate) fn plan(shape: &Shape, scale: f64, seed: u64) -> Vec<DatasetFile> {
    let mut rng = SplitMix::new(seed ^ (shape.prefix as u64).wrapping_mul(0x1000_0000_01B3));
    (1..=scaled_count(shape, scale))
        .map(|i| {
            let z = rng.normal().clamp(-3.0, 3.0);
            let size = (shape.mean_bytes + z * shape.sd_bytes).round().max(1.0) as u64;
            DatasetFile {
                path: format!("{}{:06}.bin", shape.prefix, i),
                size,
            }
        })
        .collect()
}

/// Mean and (population) standard deviation of the sizes, for reporting a generated dataset.
pub(crate) fn size_stats(entries: &[DatasetFile]) -> (f64, f64) {
    let n = entries.len().max(1) as f64;
    let mean = entries.iter().map(|e| e.size as f64).sum::<f64>() / n;
    let var = entries
        .iter()
        .map(|e| (e.size as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var.sqrt())
}

/// Reads a manifest (`path<TAB>size` lines).
pub(crate) fn read_manifest(path: &Path) -> Result<Vec<DatasetFile>, TestbedError> {
    let text = fs::read_to_string(path).map_err(TestbedError::io(format!(
        "cannot read manifest {}",
        path.display()
    )))?;
    text.lines()
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| {
            let bad = |why: String| TestbedError::BadManifest {
                path: path.to_path_buf(),
                line: i + 1,
                why,
            };
            let (p, s) = l
                .split_once('\t')
                .ok_or_else(|| bad("expected `path<TAB>size`".into()))?;
            let size = s
                .parse()
                .map_err(|e| bad(format!("size {s:?} is not a number: {e}")))?;
            Ok(DatasetFile {
                path: p.to_string(),
                size,
            })
        })
        .collect()
}

fn write_manifest(path: &Path, entries: &[DatasetFile]) -> Result<(), TestbedError> {
    wattio_files::write_atomically(path, |w| {
        entries
            .iter()
            .try_for_each(|e| writeln!(w, "{}\t{}", e.path, e.size))
    })?;
    Ok(())
}

/// Whether the dataset at `dir` matches its manifest (all files present with their sizes).
fn complete(dir: &Path, manifest: &Path, want: &[DatasetFile]) -> bool {
    match read_manifest(manifest) {
        Ok(have) if have == want => have.iter().all(|e| {
            fs::metadata(dir.join(&e.path))
                .map(|m| m.len() == e.size)
                .unwrap_or(false)
        }),
        _ => false,
    }
}

/// Fills `path` with `size` pseudo-random bytes from `seed`.
fn write_file(
    path: &Path,
    size: u64,
    seed: u64,
    wrote: &mut dyn FnMut(u64),
) -> Result<(), TestbedError> {
    let mut f = fs::File::create(path).map_err(cannot_create(path))?;
    let mut rng = SplitMix::new(seed);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        f.write_all(&buf[..n]).map_err(TestbedError::io(format!(
            "cannot write {} (disk full?)",
            path.display()
        )))?;
        left -= n as u64;
        wrote(n as u64);
    }
    Ok(())
}

/// How far the generation of one dataset is, for a progress display the caller draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetProgress {
    /// The dataset being written.
    pub dataset: &'static str,
    /// Bytes written so far and in all; the last update of a dataset has them equal.
    pub done_bytes: u64,
    pub total_bytes: u64,
}

/// What was generated for one dataset.
#[derive(Debug, Clone)]
pub struct DatasetSummary {
    pub name: String,
    pub dir: PathBuf,
    pub files: usize,
    pub total_bytes: u64,
    pub mean_bytes: f64,
    pub sd_bytes: f64,
    /// False when an identical complete dataset was already there.
    pub written: bool,
}

/// Generates the datasets in `names` (any of [`DATASET_NAMES`]) under `out` at `scale`. A dataset whose
/// manifest already matches is left alone; "mixed" generates the three base datasets it links to.
/// `progress` is told how far each dataset being written is (every MiB).
pub fn generate_dataset(
    out: &Path,
    names: &[String],
    scale: f64,
    seed: u64,
    progress: &Sink<DatasetProgress>,
) -> Result<Vec<DatasetSummary>, TestbedError> {
    if !(scale.is_finite() && scale > 0.0 && scale <= 1.0) {
        return Err(TestbedError::ScaleOutOfRange(scale));
    }
    for n in names {
        if !DATASET_NAMES.contains(&n.as_str()) {
            return Err(TestbedError::UnknownDataset(n.clone()));
        }
    }
    fs::create_dir_all(out).map_err(cannot_create(out))?;
    let want_mixed = names.iter().any(|n| n == "mixed");
    let mut summaries = Vec::new();
    let mut all = Vec::new();
    for shape in &TABLE_II {
        let wanted = names.iter().any(|n| n == shape.name);
        if !wanted && !want_mixed {
            continue;
        }
        let entries = plan(shape, scale, seed);
        let dir = out.join(shape.name);
        let manifest = out.join(format!("{}.tsv", shape.name));
        let written = !complete(&dir, &manifest, &entries);
        if written {
            let _ = fs::remove_file(&manifest);
            fs::create_dir_all(&dir).map_err(cannot_create(&dir))?;
            let total: u64 = entries.iter().map(|e| e.size).sum();
            let mut done = 0;
            let mut wrote = |n: u64| {
                done += n;
                progress.tell(&DatasetProgress {
                    dataset: shape.name,
                    done_bytes: done,
                    total_bytes: total,
                });
            };
            for (i, e) in entries.iter().enumerate() {
                write_file(
                    &dir.join(&e.path),
                    e.size,
                    seed ^ ((shape.prefix as u64) << 32) ^ i as u64,
                    &mut wrote,
                )?;
            }
            write_manifest(&manifest, &entries)?;
        }
        all.extend(entries.iter().map(|e| (shape.name, e.clone())));
        if wanted {
            summaries.push(summary(shape.name, dir, &entries, written));
        }
    }
    if want_mixed {
        let dir = out.join("mixed");
        let manifest = out.join("mixed.tsv");
        let entries: Vec<DatasetFile> = all.iter().map(|(_, e)| e.clone()).collect();
        let written = !complete(&dir, &manifest, &entries);
        if written {
            let _ = fs::remove_file(&manifest);
            fs::create_dir_all(&dir).map_err(cannot_create(&dir))?;
            for (base, e) in &all {
                let (src, dst) = (out.join(base).join(&e.path), dir.join(&e.path));
                let _ = fs::remove_file(&dst);
                fs::hard_link(&src, &dst)
                    .or_else(|_| fs::copy(&src, &dst).map(|_| ()))
                    .map_err(TestbedError::io(format!(
                        "cannot link {} to {}",
                        src.display(),
                        dst.display()
                    )))?;
            }
            write_manifest(&manifest, &entries)?;
        }
        summaries.push(summary("mixed", dir, &entries, written));
    }
    Ok(summaries)
}

/// `cannot create PATH: why`.
fn cannot_create(path: &Path) -> impl FnOnce(std::io::Error) -> TestbedError {
    TestbedError::io(format!("cannot create {}", path.display()))
}

fn summary(name: &str, dir: PathBuf, entries: &[DatasetFile], written: bool) -> DatasetSummary {
    let (mean_bytes, sd_bytes) = size_stats(entries);
    DatasetSummary {
        name: name.into(),
        dir,
        files: entries.len(),
        total_bytes: entries.iter().map(|e| e.size).sum(),
        mean_bytes,
        sd_bytes,
        written,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    #[test]
    fn table_ii_totals_hold_in_binary_units() {
        // The paper's totals: 1.94, 11.70 and 27.85 GB (GiB).
        let gib = 1024.0 * MIB;
        for (shape, total) in TABLE_II.iter().zip([1.94, 11.70, 27.85]) {
            let t = shape.files as f64 * shape.mean_bytes / gib;
            // The table rounds the means to 2 decimals (2.40 MiB), hence 0.5 %.
            assert!(
                (t / total - 1.0).abs() < 0.005,
                "{}: {t:.3} GiB vs {total}",
                shape.name
            );
        }
    }

    #[test]
    fn plan_follows_the_shape_and_is_deterministic() {
        let small = &TABLE_II[0];
        let a = plan(small, 0.1, 7);
        assert_eq!(a.len(), 2000);
        assert_eq!(a, plan(small, 0.1, 7));
        assert_ne!(a, plan(small, 0.1, 8));
        let (mean, sd) = size_stats(&a);
        // 2000 draws: the sample mean is within ~3 standard errors (3·29.06/√2000 ≈ 2 KiB).
        assert!((mean - small.mean_bytes).abs() < 2.0 * KIB, "mean {mean}");
        assert!(
            (sd - small.sd_bytes).abs() < 0.1 * small.sd_bytes,
            "sd {sd}"
        );
        let lo = small.mean_bytes - 3.0 * small.sd_bytes;
        let hi = small.mean_bytes + 3.0 * small.sd_bytes;
        assert!(a
            .iter()
            .all(|e| (lo.floor() as u64..=hi.ceil() as u64).contains(&e.size)));
    }

    #[test]
    fn scaling_keeps_at_least_one_file() {
        assert_eq!(scaled_count(&TABLE_II[2], 0.001), 1);
        assert_eq!(scaled_count(&TABLE_II[2], 0.1), 13);
        assert_eq!(scaled_count(&TABLE_II[1], 0.02), 100);
    }

    #[test]
    fn generate_writes_files_manifests_and_mixed_links_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = vec!["small".into(), "mixed".into()];
        let heard: Arc<Mutex<BTreeMap<String, (u64, u64)>>> = Default::default();
        let h = Arc::clone(&heard);
        let progress = Sink::new(move |p: &DatasetProgress| {
            let prev = h
                .lock()
                .unwrap()
                .insert(p.dataset.into(), (p.done_bytes, p.total_bytes));
            assert!(
                prev.is_none_or(|(d, _)| d < p.done_bytes),
                "progress moves forward"
            );
        });
        let s = generate_dataset(dir.path(), &names, 0.0005, 1, &progress).unwrap();
        let last = heard.lock().unwrap();
        assert_eq!(
            s.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            ["small", "mixed"]
        );
        assert!(s.iter().all(|x| x.written));
        // "mixed" writes its three base datasets; each one's progress ends at its size.
        assert_eq!(
            last.keys().collect::<Vec<_>>(),
            ["large", "medium", "small"]
        );
        assert!(last
            .values()
            .all(|(done, total)| done == total && *total > 0));
        assert_eq!(last["small"].1, s[0].total_bytes);
        // small: 10 files; mixed: 10 + 3 medium (2.5 rounded) + 1 large.
        assert_eq!(s[0].files, 10);
        assert_eq!(s[1].files, 14);
        let mixed = read_manifest(&dir.path().join("mixed.tsv")).unwrap();
        for e in &mixed {
            let m = fs::metadata(dir.path().join("mixed").join(&e.path)).unwrap();
            assert_eq!(m.len(), e.size, "{}", e.path);
        }
        let big = mixed.iter().find(|e| e.path.starts_with('l')).unwrap();
        assert!(
            big.size > 100 * 1024 * 1024,
            "large files keep their size when scaled"
        );
        // Contents are pseudo-random, not zeros, and differ between files.
        let a = fs::read(dir.path().join("small/s000001.bin")).unwrap();
        let b = fs::read(dir.path().join("small/s000002.bin")).unwrap();
        assert!(a.iter().filter(|&&x| x == 0).count() < a.len() / 100);
        assert_ne!(a[..64], b[..64]);
        // Second run: nothing rewritten.
        let s2 = generate_dataset(dir.path(), &names, 0.0005, 1, &Sink::none()).unwrap();
        assert!(s2.iter().all(|x| !x.written));
        // A truncated file is noticed and the dataset regenerated.
        fs::write(dir.path().join("small/s000003.bin"), b"short").unwrap();
        let s3 =
            generate_dataset(dir.path(), &["small".to_string()], 0.0005, 1, &Sink::none()).unwrap();
        assert!(s3[0].written);
        assert_eq!(fs::read(dir.path().join("small/s000001.bin")).unwrap(), a);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            generate_dataset(dir.path(), &["huge".into()], 0.1, 1, &Sink::none())
                .unwrap_err()
                .to_string()
                .contains("unknown")
        );
        assert!(
            generate_dataset(dir.path(), &["small".into()], 0.0, 1, &Sink::none())
                .unwrap_err()
                .to_string()
                .contains("scale")
        );
        assert!(generate_dataset(dir.path(), &["small".into()], 2.0, 1, &Sink::none()).is_err());
    }

    #[test]
    fn manifest_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.tsv");
        fs::write(&p, "a\t1\nb\tlots\n").unwrap();
        let e = read_manifest(&p).unwrap_err().to_string();
        assert!(e.contains(":2:"), "{e}");
    }
}
