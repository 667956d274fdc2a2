//! Opens a generated report in headless Chromium (Debian's `chromium`, installed by
//! `make deps`) and checks it renders with no console messages other than the page's own
//! self-check line. Ignored by plain `cargo test` because it needs the browser;
//! `make test-report` runs it with `--ignored`.
//!
//! Set `WATTIO_REPORT_SCREENSHOT=path.png` to keep the screenshot.

use rustix::process::{kill_process_group, Pid, Signal};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(p) = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        }) {
            return p;
        }
    }
    panic!("chromium not found on PATH: run `make deps` (installs Debian's chromium) to run the browser test");
}

/// Runs headless Chromium on `page`; returns the console lines it logged.
fn render(page: &Path, screenshot: &Path) -> Vec<String> {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Own process group, so the browser's helper processes can be killed together.
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let pgid = Pid::from_child(&child);
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(90) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Always clean up the whole group (helpers may outlive the main process).
    let _ = kill_process_group(pgid, Signal::KILL);
    let _ = child.wait();
    let log = reader.join().unwrap();
    assert!(
        status.is_some(),
        "chromium did not finish within 90 s; log:\n{log}"
    );
    log.lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect()
}

#[test]
#[ignore = "needs chromium; run by `make test-report`"]
fn report_renders_without_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results");
    let page = dir.path().join("report.html");
    wattio_report::write_report(&fixtures, &page, "wattio report (fixtures)").unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let charts = html
        .matches("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\"")
        .count();
    assert!(charts >= 12);
    // The page as written, plus the layout check of every chart (line, box and bar charts).
    std::fs::write(
        &page,
        html.replace("</body>", &format!("{LAYOUT_CHECK}</body>")),
    )
    .unwrap();
    let shot = dir.path().join("shot.png");
    let console = render(&page, &shot);
    let ok = format!("\"wattio-report-check: ok {charts} charts\"");
    assert_eq!(
        console.len(),
        2,
        "expected the self-check and layout-check lines, got: {console:#?}"
    );
    assert!(console[0].contains(&ok), "{}", console[0]);
    let layout_ok = format!("chart-layout-check: ok {charts} charts");
    assert!(console[1].contains(&layout_ok), "{}", console[1]);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot too small: {} bytes",
        png.len()
    );
    if let Some(keep) = std::env::var_os("WATTIO_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// The harness itself must catch a broken page, or the test above proves nothing.
#[test]
#[ignore = "needs chromium; run by `make test-report`"]
fn harness_detects_a_script_error() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>",
    )
    .unwrap();
    let console = render(&page, &dir.path().join("s.png"));
    assert!(
        console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError")),
        "{console:#?}"
    );
}

/// In the browser, after layout: every text of every chart lies inside its chart and no two
/// texts of a chart overlap (by their rendered boxes, 2 px of slack for line spacing). Logs
/// one line, `chart-layout-check: ok N charts` or the problems.
const LAYOUT_CHECK: &str = r#"<script>
const problems = [];
const charts = [...document.querySelectorAll('svg.chart')];
charts.forEach((svg, k) => {
  const name = svg.querySelector('title').textContent.slice(0, 40);
  const b = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => ({ s: t.textContent, r: t.getBoundingClientRect() }));
  for (const a of texts) {
    if (a.r.left < b.left - 1 || a.r.right > b.right + 1 || a.r.top < b.top - 1 || a.r.bottom > b.bottom + 1)
      problems.push(`${name}: "${a.s}" outside the chart`);
  }
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const p = texts[i].r, q = texts[j].r;
    const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
    const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
    if (w > 2 && h > 2) problems.push(`${name}: "${texts[i].s}" overlaps "${texts[j].s}"`);
  }
});
console.log(problems.length ? 'chart-layout-check: FAIL ' + problems.slice(0, 15).join(' | ')
                            : `chart-layout-check: ok ${charts.length} charts`);
</script>"#;

/// Every chart `wattio report bench-transfer` draws (grouped bars with error bars, a reference
/// line, shaded bands, rotated group labels), from a real bench run, rendered by Chromium:
/// no script errors, and no text outside its chart or on top of another. The screenshot is
/// kept with `WATTIO_BENCH_TRANSFER_SCREENSHOT=path.png`.
#[test]
#[ignore = "needs chromium; run by `make test-report`"]
fn bench_transfer_charts_render_without_overlapping_text() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-transfer");
    let done = wattio_report::write_bench_transfer(&fixture, dir.path(), "transfer", true).unwrap();
    let mut page = String::from("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>");
    for f in &done.files {
        page.push_str("<div>");
        page.push_str(&std::fs::read_to_string(f).unwrap());
        page.push_str("</div>");
    }
    page.push_str(LAYOUT_CHECK);
    page.push_str("</body></html>");
    let html = dir.path().join("charts.html");
    std::fs::write(&html, page).unwrap();
    let shot = dir.path().join("shot.png");
    let console = render(&html, &shot);
    assert_eq!(
        console.len(),
        1,
        "expected only the check line: {console:#?}"
    );
    assert!(
        console[0].contains(&format!(
            "chart-layout-check: ok {} charts",
            done.files.len()
        )),
        "{}",
        console[0]
    );
    if let Some(keep) = std::env::var_os("WATTIO_BENCH_TRANSFER_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// The layout check must catch overlapping text, or the test above proves nothing.
#[test]
#[ignore = "needs chromium; run by `make test-report`"]
fn layout_check_detects_overlapping_text() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("overlap.html");
    let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="200" height="100"><title>t</title><text x="10" y="50" font-size="12">first label</text><text x="20" y="52" font-size="12">second label</text></svg>"#;
    std::fs::write(
        &page,
        format!("<!DOCTYPE html><html><body>{svg}{LAYOUT_CHECK}</body></html>"),
    )
    .unwrap();
    let console = render(&page, &dir.path().join("s.png"));
    assert!(
        console
            .iter()
            .any(|l| l.contains("chart-layout-check: FAIL")
                && l.contains("\\\"first label\\\" overlaps \\\"second label\\\"")
                || l.contains("\"first label\" overlaps \"second label\"")),
        "{console:#?}"
    );
}
