//! docs/architecture.md states which workspace crate depends on which, in its
//! `crate-dependencies` block; this compares that list with the manifests (`cargo metadata`),
//! so the document cannot drift from the code. A failure names each edge to add or remove.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A crate's workspace dependencies: for the library or binary (normal and build
/// dependencies), and for its tests and benches only (dev-dependencies).
#[derive(Debug, Default, Clone, PartialEq)]
struct Deps {
    normal: BTreeSet<String>,
    tests: BTreeSet<String>,
}

const BLOCK: &str = "```crate-dependencies";
const DOC: &str = "docs/architecture.md";

/// Parses the block: `crate → dep, dep; tests: dep` lines (`(none)` for no dependency, `#`
/// comments, a crate may take several lines).
fn documented(doc: &str) -> Result<BTreeMap<String, Deps>, String> {
    let start = doc
        .find(BLOCK)
        .ok_or_else(|| format!("{DOC} has no {BLOCK} block"))?;
    let body = &doc[start + BLOCK.len()..];
    let body = &body[..body
        .find("```")
        .ok_or_else(|| format!("{DOC}: the {BLOCK} block is not closed"))?];
    let mut map: BTreeMap<String, Deps> = BTreeMap::new();
    let names = |list: &str| -> Vec<String> {
        list.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "(none)")
            .map(String::from)
            .collect()
    };
    for line in body.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = line
            .split_once('→')
            .ok_or_else(|| format!("{DOC}: `{line}` is not `crate → dependencies`"))?;
        let deps = map.entry(name.trim().to_string()).or_default();
        let mut parts = rest.split(';');
        deps.normal.extend(names(parts.next().unwrap_or("")));
        for part in parts {
            let list = part
                .trim()
                .strip_prefix("tests:")
                .ok_or_else(|| format!("{DOC}: `{line}`: after `;` write `tests: crate, …`"))?;
            deps.tests.extend(names(list));
        }
    }
    Ok(map)
}

/// The workspace's crates and their workspace dependencies, from `cargo metadata`, with each
/// crate's manifest path relative to the workspace.
fn actual(workspace: &Path) -> BTreeMap<String, (String, Deps)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let mut deps = Deps::default();
            for d in p["dependencies"].as_array().unwrap() {
                let name = d["name"].as_str().unwrap();
                if !members.contains(name) {
                    continue;
                }
                match d["kind"].as_str() {
                    Some("dev") => deps.tests.insert(name.to_string()),
                    _ => deps.normal.insert(name.to_string()),
                };
            }
            // A dependency of the crate itself is there for its tests too: list it once.
            deps.tests = &deps.tests - &deps.normal;
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            let manifest = manifest.strip_prefix(workspace).unwrap_or(manifest);
            (
                p["name"].as_str().unwrap().to_string(),
                (manifest.display().to_string(), deps),
            )
        })
        .collect()
}

/// Every difference between the manifests and the document, one line each.
fn differences(
    doc: &BTreeMap<String, Deps>,
    code: &BTreeMap<String, (String, Deps)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, (manifest, deps)) in code {
        let Some(listed) = doc.get(name) else {
            out.push(format!(
                "crate {name} ({manifest}) has no line in {DOC}'s {BLOCK} block: add `{name} → {}`",
                join(&deps.normal)
            ));
            continue;
        };
        for (kind, have, said) in [
            ("", &deps.normal, &listed.normal),
            (" (tests:)", &deps.tests, &listed.tests),
        ] {
            for d in have.difference(said) {
                out.push(format!(
                    "edge {name} → {d}{kind} is in {manifest} but missing from {DOC}: add it"
                ));
            }
            for d in said.difference(have) {
                out.push(format!(
                    "edge {name} → {d}{kind} is in {DOC} but not in {manifest}: remove it"
                ));
            }
        }
    }
    for name in doc.keys().filter(|n| !code.contains_key(*n)) {
        out.push(format!(
            "{DOC} lists crate {name}, which is not in the workspace: remove its line"
        ));
    }
    out
}

fn join(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "(none)".into()
    } else {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[test]
fn architecture_md_lists_the_crate_dependencies_of_the_manifests() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf();
    let doc = std::fs::read_to_string(workspace.join(DOC)).unwrap();
    let diff = differences(&documented(&doc).unwrap(), &actual(&workspace));
    assert!(
        diff.is_empty(),
        "{DOC} and the manifests disagree:\n{}",
        diff.join("\n")
    );
}

#[test]
fn each_kind_of_drift_is_named() {
    let doc = documented(
        "text\n```crate-dependencies\n# comment\na → b, c; tests: d\na → e\nb → (none)\ngone → (none)\n```\n",
    )
    .unwrap();
    let deps = |normal: &[&str], tests: &[&str]| Deps {
        normal: normal.iter().map(|s| s.to_string()).collect(),
        tests: tests.iter().map(|s| s.to_string()).collect(),
    };
    assert_eq!(doc["a"], deps(&["b", "c", "e"], &["d"]));
    let code = BTreeMap::from([
        (
            "a".to_string(),
            ("a/Cargo.toml".to_string(), deps(&["b", "e", "f"], &["d"])),
        ),
        (
            "b".to_string(),
            ("b/Cargo.toml".to_string(), deps(&[], &["a"])),
        ),
        (
            "new".to_string(),
            ("new/Cargo.toml".to_string(), deps(&["a"], &[])),
        ),
    ]);
    assert_eq!(
        differences(&doc, &code),
        [
            "edge a → f is in a/Cargo.toml but missing from docs/architecture.md: add it",
            "edge a → c is in docs/architecture.md but not in a/Cargo.toml: remove it",
            "edge b → a (tests:) is in b/Cargo.toml but missing from docs/architecture.md: add it",
            "crate new (new/Cargo.toml) has no line in docs/architecture.md's ```crate-dependencies block: add `new → a`",
            "docs/architecture.md lists crate gone, which is not in the workspace: remove its line",
        ]
    );
    assert!(documented("no block").is_err());
    assert!(documented("```crate-dependencies\na b\n```").is_err());
    assert!(documented("```crate-dependencies\na → b; dev: c\n```").is_err());
}
