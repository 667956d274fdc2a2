//! Energy of a region of code: a Python and a Java program, run by `wattio measure`, measure two
//! phases of known CPU load through their clients (clients/python, clients/java) and get
//! energies in the ratio of the loads, labelled as `measure` labels its figures.

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

/// This file's tests, one at a time: a program's share of the machine's energy depends on what
/// else runs, and another test's programs would tilt one phase and not the other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held for a whole test (the Java test's compiler included).
fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `program` under `wattio measure --json` (the model, so that the figures are the same
/// on any machine's counters); the program writes its regions' figures to `out`, one JSON
/// object a line. Returns those and measure's JSON.
fn measured(program: &[&str], out: &Path) -> (Vec<serde_json::Value>, serde_json::Value) {
    let o = Command::new(BIN)
        .args(["measure", "--source", "model", "--no-sync", "--json", "--"])
        .args(program)
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let figures = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (figures, report)
}

/// Phase `two` burns twice the CPU time of phase `one`, so its share is about twice as large;
/// `two/inner` is nested in `two`; measure's JSON sums each name once.
fn check(figures: &[serde_json::Value], report: &serde_json::Value) {
    let get = |name: &str| {
        figures
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {figures:?}"))
    };
    let (one, two, inner) = (get("one"), get("two"), get("two/inner"));
    let num = |f: &serde_json::Value, k: &str| f[k].as_f64().unwrap();
    let cpu = num(two, "cpu_s") / num(one, "cpu_s");
    let share = num(two, "attributed_j") / num(one, "attributed_j");
    assert!((1.6..=2.5).contains(&cpu), "CPU ratio {cpu}: {figures:?}");
    assert!(
        (1.6..=2.5).contains(&share),
        "energy share ratio {share}: {figures:?}"
    );
    assert!(num(inner, "cpu_s") < num(two, "cpu_s"), "{figures:?}");
    for f in figures {
        let label = f["attributed_label"].as_str().unwrap();
        assert!(
            label.starts_with("estimated (model: ")
                && label.ends_with(", attributed (cpu-time share)"),
            "{label}"
        );
        assert!(num(f, "attributed_j") <= num(f, "energy_j") + 1e-9, "{f}");
    }
    let totals = report["regions"]["totals"].as_array().unwrap();
    let names: Vec<&str> = totals.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["one", "two", "two/inner"], "{report}");
    assert!(totals.iter().all(|t| t["count"] == 1), "{report}");
}

#[test]
fn a_python_program_measures_its_own_phases() {
    let _alone = alone();
    let d = tempfile::tempdir().unwrap();
    let prog = d.path().join("phases.py");
    std::fs::write(
        &prog,
        r#"import json, sys, time
import wattio

def burn(cpu_s):
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass

figures = []
with wattio.region("one") as one:
    burn(0.3)
with wattio.region("two") as two:
    burn(0.3)
    with wattio.region("inner") as inner:
        burn(0.3)
for r in (one, two, inner):
    figures.append(dict(name=r.path, cpu_s=r.cpu_s, energy_j=r.energy_j,
                        attributed_j=r.attributed_j, attributed_label=r.attributed_label))
with open(sys.argv[1], "w") as f:
    f.write("\n".join(json.dumps(x) for x in figures))
"#,
    )
    .unwrap();
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let py = format!(
        "import sys; sys.path.insert(0, {:?}); sys.argv = sys.argv[1:]; exec(open(sys.argv[0]).read())",
        client.to_str().unwrap()
    );
    let (figures, report) = measured(
        &["python3", "-c", &py, prog.to_str().unwrap()],
        &d.path().join("figures.jsonl"),
    );
    check(&figures, &report);
}

#[test]
fn a_java_program_measures_its_own_phases() {
    let _alone = alone();
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("Phases.java");
    std::fs::write(
        &src,
        r#"import io.wattio.Region;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

public class Phases {
    static void burn(double cpuS) {
        var bean = ManagementFactory.getThreadMXBean();
        long end = bean.getCurrentThreadCpuTime() + (long) (cpuS * 1e9);
        while (bean.getCurrentThreadCpuTime() < end) { }
    }
    static String json(Region r) {
        return String.format(java.util.Locale.ROOT,
            "{\"name\":\"%s\",\"cpu_s\":%f,\"energy_j\":%f,\"attributed_j\":%f,\"attributed_label\":\"%s\"}",
            r.path(), r.cpuS(), r.energyJ(), r.attributedJ(), r.attributedLabel());
    }
    public static void main(String[] args) throws Exception {
        List<String> out = new ArrayList<>();
        Region one, two, inner;
        try (Region r = Region.open("one")) { one = r; burn(0.3); }
        try (Region r = Region.open("two")) {
            two = r;
            burn(0.3);
            try (Region i = Region.open("inner")) { inner = i; burn(0.3); }
        }
        for (Region r : new Region[] {one, two, inner}) out.add(json(r));
        Files.write(Path.of(args[0]), out);
    }
}
"#,
    )
    .unwrap();
    let client = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/java/src/main/java/io/wattio/Region.java");
    let classes = d.path().join("classes");
    let javac = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(&client)
        .arg(&src)
        .output()
        .expect("javac (JDK 17; make deps installs it)");
    assert!(
        javac.status.success(),
        "{}",
        String::from_utf8_lossy(&javac.stderr)
    );
    let (figures, report) = measured(
        &["java", "-cp", classes.to_str().unwrap(), "Phases"],
        &d.path().join("figures.jsonl"),
    );
    check(&figures, &report);
}

#[test]
fn a_client_that_breaks_the_protocol_is_refused_and_counted() {
    let _alone = alone();
    // A raw client: an END for a region never opened, a name with a control character.
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("replies.txt");
    let script = r#"import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["WATTIO_REGION_SOCKET"])
f = s.makefile("rb")
replies = []
for line in [b"END 7\n", b"BEGIN a\x01b\n", b"HELLO\n", b"BEGIN ok\n"]:
    s.sendall(line); replies.append(f.readline().decode().strip())
open(sys.argv[1], "w").write("\n".join(replies))
"#;
    let o = Command::new(BIN)
        .args(["measure", "--source", "model", "--no-sync", "--json", "--"])
        .args(["python3", "-c", script])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let replies = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = replies.lines().collect();
    assert_eq!(lines[0], "ERR no open region 7");
    assert!(
        lines[1].starts_with("ERR a region name holds no control"),
        "{replies}"
    );
    assert!(lines[2].starts_with("ERR expected BEGIN"), "{replies}");
    assert!(lines[3].starts_with("OK "), "{replies}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["regions"]["refused"], 3, "{report}");
    assert_eq!(report["regions"]["unclosed"], 1, "{report}");
}
