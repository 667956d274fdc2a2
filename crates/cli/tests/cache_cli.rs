//! `wattio cache ...` end to end through the real binary.

use std::process::Command;

fn wattio(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_wattio"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn replay_json_has_the_documented_fields_and_is_deterministic() {
    let args = [
        "cache",
        "replay",
        "--workload",
        "web",
        "--profile",
        "paper-2004",
        "--knob",
        "95",
        "--seed",
        "4",
        "--json",
    ];
    let (code, out, err) = wattio(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v.as_array().unwrap();
    assert!(rows.len() >= 10);
    for r in rows {
        for f in [
            "strategy",
            "knob",
            "ghost_hints",
            "mean_response_s",
            "energy_j",
            "energy_kind",
        ] {
            assert!(r.get(f).is_some(), "missing {f} in {r}");
        }
        assert_eq!(r["knob"], 95);
        assert!(r["energy_kind"].as_str().unwrap().contains("estimated"));
    }
    let (_, again, _) = wattio(&args);
    assert_eq!(out, again);
}

#[test]
fn ghost_hints_flag_selects_variants() {
    let (code, out, err) = wattio(&[
        "cache",
        "replay",
        "--workload",
        "email",
        "--ghost-hints",
        "off",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ghosts: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ghost_hints"].as_str().unwrap())
        .collect();
    assert!(ghosts.contains(&"off"));
    assert!(!ghosts.contains(&"paper") && !ghosts.contains(&"predictive"));
}

#[test]
fn csv_trace_file_replays_and_bad_lines_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("t.csv");
    let (code, csv, _) = wattio(&["cache", "trace", "--workload", "email", "--seed", "2"]);
    assert_eq!(code, 0);
    assert!(csv.starts_with("time_s,object,size_bytes,op,cached\n"));
    std::fs::write(&good, &csv).unwrap();
    let (code, out, err) = wattio(&["cache", "replay", "--workload", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("adaptive+ghost-paper"));
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "time_s,object,size_bytes,op,cached\n0,a,10,read,1\n1,b,ten,read,0\n",
    )
    .unwrap();
    let (code, _, err) = wattio(&["cache", "replay", "--workload", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.starts_with("wattio: error: "), "{err}");
    assert!(
        err.contains("bad.csv:3:") && err.contains("size_bytes"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_profile_and_knob_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    let (_, text, _) = wattio(&["cache", "profiles", "paper-2004"]);
    std::fs::write(&p, text.replacen("power_w = 0.76", "power_w = -0.76", 1)).unwrap();
    let (code, _, err) = wattio(&[
        "cache",
        "replay",
        "--workload",
        "email",
        "--profile",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("p.toml:") && err.contains("power_w"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = wattio(&[
        "cache",
        "replay",
        "--workload",
        "email",
        "--profile",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("paper-2004"), "lists the choices: {err}");
    let (code, _, _) = wattio(&["cache", "replay", "--workload", "email", "--knob", "101"]);
    assert_ne!(code, 0);
    let (code, _, err) = wattio(&["cache", "replay", "--workload", "/no/such/file"]);
    assert_eq!(code, 2);
    assert!(err.contains("neither email"), "{err}");
}

#[test]
fn sweep_writes_csv_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = wattio(&[
        "cache",
        "sweep",
        "--workload",
        "web-full",
        "--seeds",
        "1",
        "--output",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("== web-full"));
    let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
    // 7 knobs × 3 ghost variants + 7 knob-independent rows
    assert_eq!(csv.lines().count(), 1 + 21 + 7);
    for f in ["web-full-response.svg", "web-full-energy.svg"] {
        let s = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(s.starts_with("<svg") && s.contains("estimated"));
    }
}

#[test]
fn ucb_trace_file_with_client_filter() {
    use wattio_sim::encode_ucb;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("UCB-home-IP-fixture.tr");
    let client = u32::from_be_bytes([23, 240, 8, 98]);
    let mut bytes = Vec::new();
    for i in 0..30 {
        bytes.extend(encode_ucb(
            848278028.0 + i as f64 * 7.0,
            client,
            170,
            844 + i,
            &format!("GET {i}..gif HTTP/1.0"),
        ));
        bytes.extend(encode_ucb(
            848278029.0 + i as f64 * 7.0,
            7,
            170,
            844,
            "GET x.html HTTP/1.0",
        ));
    }
    std::fs::write(&p, &bytes).unwrap();
    let (code, out, err) = wattio(&[
        "cache",
        "replay",
        "--workload",
        p.to_str().unwrap(),
        "--ucb-client",
        "23.240.8.98",
        "--minutes",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // 2 minutes at one request per 7 s: requests at 0..=119 s, i.e. 18 of them.
    assert_eq!(v[0]["reads"], 18);
    // A truncated file is a one-line error naming the record.
    std::fs::write(&p, &bytes[..bytes.len() - 5]).unwrap();
    let (code, _, err) = wattio(&["cache", "replay", "--workload", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("record 59"), "{err}");
}
