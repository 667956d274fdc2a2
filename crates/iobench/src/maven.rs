//! Finding and (re)building the Maven module `iobench/` and running its generator.

use crate::IoBenchError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;
use wattio_progress::Sink;

pub use wattio_results::iobench::Libs;

/// Finds the `iobench/` Maven module: `explicit`, else `WATTIO_IOBENCH_DIR`, else an
/// `iobench/pom.xml` in the current directory or one of its parents, else the source checkout
/// this binary was built from.
pub fn find_maven_module(explicit: Option<&Path>) -> Result<PathBuf, IoBenchError> {
    let ok = |p: &Path| p.join("pom.xml").is_file();
    if let Some(p) = explicit {
        if ok(p) {
            return Ok(p.to_path_buf());
        }
        return Err(IoBenchError::NoPom(p.to_path_buf()));
    }
    if let Some(p) = std::env::var_os("WATTIO_IOBENCH_DIR") {
        let p = PathBuf::from(p);
        if ok(&p) {
            return Ok(p);
        }
        return Err(IoBenchError::NoPomInEnv(p));
    }
    if let Ok(mut d) = std::env::current_dir() {
        loop {
            if ok(&d.join("iobench")) {
                return Ok(d.join("iobench"));
            }
            if !d.pop() {
                break;
            }
        }
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../iobench");
    if ok(&built) {
        return Ok(built);
    }
    Err(IoBenchError::NoModule)
}

/// The benchmark jar for `libs`.
pub(crate) fn jar_path(module: &Path, libs: Libs) -> PathBuf {
    // One Maven build tree per library set (pom.xml: build.directory = target/${libs}).
    module
        .join("target")
        .join(libs.as_str())
        .join(format!("benchmarks-{}.jar", libs.as_str()))
}

fn newest_source(module: &Path) -> std::io::Result<SystemTime> {
    fn walk(p: &Path, newest: &mut SystemTime) -> std::io::Result<()> {
        let md = std::fs::metadata(p)?;
        if md.is_dir() {
            for e in std::fs::read_dir(p)? {
                walk(&e?.path(), newest)?;
            }
        } else if let Ok(t) = md.modified() {
            *newest = (*newest).max(t);
        }
        Ok(())
    }
    let mut newest = SystemTime::UNIX_EPOCH;
    walk(&module.join("pom.xml"), &mut newest)?;
    walk(&module.join("src/main"), &mut newest)?;
    Ok(newest)
}

/// Whether the jar is missing or older than the module's sources.
pub(crate) fn needs_build(module: &Path, libs: Libs) -> Result<bool, IoBenchError> {
    let jar = jar_path(module, libs);
    let Ok(md) = std::fs::metadata(&jar) else {
        return Ok(true);
    };
    let built = md.modified().map_err(IoBenchError::io(format!(
        "reading the time of {}",
        jar.display()
    )))?;
    Ok(built < newest_source(module).map_err(IoBenchError::io("reading the iobench sources"))?)
}

/// Builds the jar with `mvn -B -q -DskipTests package` when needed; returns its path.
pub fn ensure_jar(module: &Path, libs: Libs, log: &Sink<str>) -> Result<PathBuf, IoBenchError> {
    let jar = jar_path(module, libs);
    if !needs_build(module, libs)? {
        return Ok(jar);
    }
    log.tell(&format!(
        "building the JMH benchmarks ({} libraries) with Maven…",
        libs.as_str()
    ));
    let mut cmd = Command::new("mvn");
    cmd.args(["-B", "-q", "-DskipTests", "package"])
        .current_dir(module);
    if libs == Libs::Current {
        cmd.arg("-Plibs-current");
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(IoBenchError::NoMaven),
        Err(e) => return Err(IoBenchError::io("running mvn")(e)),
    };
    if !out.status.success() {
        return Err(IoBenchError::MavenFailed {
            status: out.status.to_string(),
            output: output_tail(&out),
        });
    }
    if !jar.is_file() {
        return Err(IoBenchError::NoJar(jar));
    }
    Ok(jar)
}

/// The last few non-empty lines a finished command printed, joined on one line.
fn output_tail(out: &std::process::Output) -> String {
    tail(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}

/// The last few non-empty lines of two outputs, joined on one line (for one-line errors).
pub(crate) fn tail(stdout: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| !l.trim().is_empty())
        .collect();
    let n = lines.len();
    lines[n.saturating_sub(4)..].join(" | ")
}

/// Generates (or keeps) the study's files for `sizes` in `dir` with the Java generator.
pub(crate) fn generate(
    java: &str,
    jar: &Path,
    dir: &Path,
    sizes: &[&str],
) -> Result<(), IoBenchError> {
    std::fs::create_dir_all(dir).map_err(IoBenchError::io(format!(
        "creating the data directory {}",
        dir.display()
    )))?;
    let out = Command::new(java)
        .arg("-cp")
        .arg(jar)
        .arg("io.wattio.iobench.FileGen")
        .arg(dir)
        .args(sizes)
        .output()
        .map_err(|e| java_error(java, e))?;
    if !out.status.success() {
        return Err(IoBenchError::JavaFailed {
            what: "generating the files",
            output: output_tail(&out),
        });
    }
    Ok(())
}

/// The Java catalog as `(op, method, buffered)` triples (`Catalog.main`).
pub fn java_catalog(java: &str, jar: &Path) -> Result<Vec<(String, String, bool)>, IoBenchError> {
    let out = Command::new(java)
        .arg("-cp")
        .arg(jar)
        .arg("io.wattio.iobench.Catalog")
        .output()
        .map_err(|e| java_error(java, e))?;
    if !out.status.success() {
        return Err(IoBenchError::JavaFailed {
            what: "listing the Java catalog",
            output: output_tail(&out),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| (f[0].to_string(), f[1].to_string(), f[3] == "true"))
        })
        .collect())
}

/// Why `java` could not be started.
pub(crate) fn java_error(java: &str, e: std::io::Error) -> IoBenchError {
    if e.kind() == std::io::ErrorKind::NotFound {
        IoBenchError::NoJava(java.to_string())
    } else {
        IoBenchError::io(format!("running {java}"))(e)
    }
}
