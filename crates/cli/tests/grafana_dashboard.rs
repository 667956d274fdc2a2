//! The Grafana dashboard's queries are PromQL that Prometheus accepts, over the families the
//! exporter writes: each panel's expression goes through `promtool check rules` as a recording
//! rule, with the dashboard's variables set as Grafana would.

use std::process::Command;

/// The exporter's sources, where every family name is written (its module and submodules).
fn exporter_sources() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../meter/src/export");
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            text.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    text
}

#[test]
fn every_panel_query_parses_and_names_only_exported_families() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/wattio-dashboard.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(String::from))
        .collect();
    assert!(exprs.len() >= 9, "{exprs:?}");
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("wattio_platform_energy_joules_total")),
        "the whole-machine panel reads the platform family"
    );
    assert!(
        exprs
            .iter()
            .any(|e| e.contains("wattio_disk_energy_joules_total")),
        "the disk panel reads the disks' family"
    );
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e.replace("$instance", ".*").replace("$__range", "1h");
        // Every family a panel reads is one the exporter writes.
        for family in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if family.starts_with("wattio_") {
                let stem = family.trim_end_matches("_total");
                assert!(
                    exporter_sources().contains(&format!("\"{stem}\"")),
                    "{family} is not a family the exporter writes"
                );
            }
        }
        rules.push_str(&format!(
            "      - record: dashboard:panel{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let o = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool (make deps installs Debian's prometheus package)");
    assert!(
        o.status.success(),
        "{}{}\n{rules}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
