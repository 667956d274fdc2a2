//! A public type name means one thing in the whole workspace: two `pub struct|enum|trait|type`
//! items with one name in `crates/*/src` make a reader (and a `use`) guess which is meant. A
//! failure names the name and every file that declares it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The name declared by a line such as `pub struct Name<T> {` or `pub type Name = …;`.
fn declared_name(line: &str) -> Option<&str> {
    let rest = ["pub struct ", "pub enum ", "pub trait ", "pub type "]
        .iter()
        .find_map(|k| line.trim_start().strip_prefix(k))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

#[test]
fn no_public_type_name_is_declared_twice() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        rust_files(&krate.path().join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        for line in text.lines() {
            if let Some(name) = declared_name(line) {
                seen.entry(name.to_string()).or_default().push(rel.clone());
            }
        }
    }
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public type names declared more than once (rename each to what it is):\n{}",
        twice.join("\n")
    );
}

#[test]
fn the_name_parser_reads_declarations_only() {
    assert_eq!(declared_name("pub struct Plan {"), Some("Plan"));
    assert_eq!(declared_name("    pub enum Op<T> {"), Some("Op"));
    assert_eq!(
        declared_name("pub type Actuator = Box<dyn Fn()>;"),
        Some("Actuator")
    );
    assert_eq!(declared_name("pub trait Source: Send {"), Some("Source"));
    assert_eq!(declared_name("pub(crate) struct Hidden;"), None);
    assert_eq!(declared_name("pub fn plan() {}"), None);
}
