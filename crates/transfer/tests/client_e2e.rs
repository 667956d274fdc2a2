//! End-to-end transfers over loopback: against `wattio serve` and nginx, with every tuner,
//! interruption, resume and corruption.

#[path = "../../http/tests/common/mod.rs"]
mod common;

use std::time::Duration;
use wattio_http::{ServerConfig, ServerHandle};
use wattio_transfer::{
    run_transfer, CoreBackend, FixedParams, Sla, TransferError, TransferOptions, TransferSummary,
    TunerChoice,
};

/// A transfer no signal cancels.
fn transfer(o: &TransferOptions) -> Result<TransferSummary, TransferError> {
    run_transfer(o, &wattio_progress::Cancel::new().unwrap())
}

fn opts(src: String, dest: &std::path::Path, sla: Sla) -> TransferOptions {
    let mut o = TransferOptions::new(src, dest, sla);
    o.tuning.interval = Duration::from_millis(100);
    // affinity would pin the whole test binary; the actuator has its own tests
    o.tuning.core_backend = CoreBackend::None;
    o.tuning.cpufreq = false;
    o.data.retries = 3;
    o
}

#[test]
fn every_sla_and_tuner_against_wattio_serve() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let cases: Vec<(Sla, TunerChoice)> = vec![
        (Sla::MaxThroughput, TunerChoice::Wattio),
        (Sla::MinEnergy, TunerChoice::Wattio),
        (Sla::Target(200e6), TunerChoice::Wattio),
        (Sla::MaxThroughput, TunerChoice::Alan),
        (Sla::MinEnergy, TunerChoice::Alan),
        (Sla::Target(200e6), TunerChoice::Alan),
        (
            Sla::MaxThroughput,
            TunerChoice::Fixed(FixedParams { cc: 1, p: 1, pp: 1 }),
        ),
        (
            Sla::MaxThroughput,
            TunerChoice::Fixed(FixedParams { cc: 3, p: 4, pp: 8 }),
        ),
    ];
    for (sla, tuner) in cases {
        let dst = tempfile::tempdir().unwrap();
        let mut o = opts(format!("http://{}/", h.addr), dst.path(), sla);
        o.tuning.tuner = tuner;
        let s = transfer(&o).unwrap_or_else(|e| panic!("{sla:?} {tuner:?}: {e:#}"));
        common::assert_same_tree(src.path(), dst.path(), &rels);
        assert_eq!(s.files, rels.len());
        assert_eq!(s.files_verified_checksum, rels.len());
        assert_eq!(s.bytes, s.total_bytes);
        assert_eq!(s.resumed_bytes, 0);
        let e = s.energy.as_ref().expect("meter on");
        if e.source.estimated {
            assert!(e.provenance.starts_with("estimated"), "{}", e.provenance);
        }
        // The --json summary reads back as the type that wrote it, field for field.
        let json = serde_json::to_value(&s).unwrap();
        let back: TransferSummary = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            json,
            "{sla:?} {tuner:?}"
        );
        assert_eq!((back.files, back.bytes), (rels.len(), s.total_bytes));
    }
}

#[test]
fn progress_and_notices_go_to_the_callers_sinks() {
    use std::sync::{Arc, Mutex};
    use wattio_progress::Sink;
    use wattio_transfer::{Notice, TransferProgress};
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let dst = tempfile::tempdir().unwrap();
    let mut o = opts(
        format!("http://{}/", h.addr),
        dst.path(),
        Sla::MaxThroughput,
    );
    let updates: Arc<Mutex<Vec<TransferProgress>>> = Arc::default();
    let u = updates.clone();
    o.tuning.progress = Sink::new(move |p: &TransferProgress| u.lock().unwrap().push(p.clone()));
    let notices: Arc<Mutex<Vec<Notice>>> = Arc::default();
    let n = notices.clone();
    o.notices = Sink::new(move |x: &Notice| n.lock().unwrap().push(x.clone()));
    let s = transfer(&o).unwrap();
    common::assert_same_tree(src.path(), dst.path(), &rels);
    let u = updates.lock().unwrap();
    let last = u.last().expect("progress updates");
    assert!(last.finished, "the last update says the loop ended");
    assert_eq!(u.iter().filter(|p| p.finished).count(), 1);
    assert_eq!(last.planned_bytes, s.total_bytes);
    assert_eq!(last.done_bytes, s.bytes);
    assert!(
        u.windows(2).all(|w| w[0].done_bytes <= w[1].done_bytes),
        "bytes done never go back"
    );
    // A wattio listing needs no note; anything told is a note or warning with text.
    assert!(notices
        .lock()
        .unwrap()
        .iter()
        .all(|x| !x.to_string().ends_with(": ")));
}

#[test]
fn single_file_url_and_listing_url() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let dst = tempfile::tempdir().unwrap();
    let s = transfer(&opts(
        format!("http://{}/large/l0.bin", h.addr),
        dst.path(),
        Sla::MaxThroughput,
    ))
    .unwrap();
    assert_eq!(s.files, 1);
    assert_eq!(
        std::fs::read(dst.path().join("l0.bin")).unwrap(),
        std::fs::read(src.path().join("large/l0.bin")).unwrap()
    );
    let dst = tempfile::tempdir().unwrap();
    transfer(&opts(
        format!("http://{}/.wattio/listing.json", h.addr),
        dst.path(),
        Sla::MinEnergy,
    ))
    .unwrap();
    common::assert_same_tree(src.path(), dst.path(), &rels);
    // a directory URL names that subtree
    let dst = tempfile::tempdir().unwrap();
    let s = transfer(&opts(
        format!("http://{}/large/", h.addr),
        dst.path(),
        Sla::MaxThroughput,
    ))
    .unwrap();
    assert_eq!((s.files, s.total_bytes), (2, 9_300_001));
    let sub: Vec<String> = vec!["l0.bin".into(), "deep/l1.bin".into()];
    common::assert_same_tree(&src.path().join("large"), dst.path(), &sub);
}

#[test]
fn against_nginx() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::default_dataset(src.path());
    wattio_http::write_listing(src.path()).unwrap();
    let Some(ng) = common::Nginx::start(src.path()) else {
        return;
    };
    for (sla, tuner) in [
        (Sla::MaxThroughput, TunerChoice::Wattio),
        (Sla::MinEnergy, TunerChoice::Alan),
        (
            Sla::MaxThroughput,
            TunerChoice::Fixed(FixedParams {
                cc: 2,
                p: 3,
                pp: 16,
            }),
        ),
    ] {
        let dst = tempfile::tempdir().unwrap();
        let mut o = opts(
            format!("http://127.0.0.1:{}/.wattio/listing.json", ng.port),
            dst.path(),
            sla,
        );
        o.tuning.tuner = tuner;
        let s = transfer(&o).unwrap_or_else(|e| panic!("nginx {tuner:?}: {e:#}"));
        common::assert_same_tree(src.path(), dst.path(), &rels);
        assert_eq!(s.files_verified_checksum, rels.len());
    }
    // a single file URL with a percent-encoded name
    let dst = tempfile::tempdir().unwrap();
    transfer(&opts(
        format!(
            "http://127.0.0.1:{}/name%20with%20spaces%20%26%20%C3%BCn%C3%AFcode.bin",
            ng.port
        ),
        dst.path(),
        Sla::MaxThroughput,
    ))
    .unwrap();
    assert_eq!(
        std::fs::read(dst.path().join("name with spaces & ünïcode.bin")).unwrap(),
        std::fs::read(src.path().join("name with spaces & ünïcode.bin")).unwrap()
    );
}

/// Kills the server mid-transfer, restarts it on the same port, and expects the transfer to
/// finish by itself with matching checksums.
#[test]
fn server_killed_mid_transfer_then_restarted() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::make_dataset(
        src.path(),
        &[
            ("a.bin", 3_000_000),
            ("b.bin", 2_500_000),
            ("c.bin", 100_000),
        ],
    );
    let mut cfg = ServerConfig::new(src.path());
    cfg.rate_limit = Some(2_000_000.0); // bytes/s per connection
    let h = ServerHandle::start(cfg.clone(), "127.0.0.1:0").unwrap();
    let addr = h.addr;
    let dst = tempfile::tempdir().unwrap();
    let mut o = opts(format!("http://{addr}/"), dst.path(), Sla::MaxThroughput);
    o.tuning.tuner = TunerChoice::Fixed(FixedParams { cc: 2, p: 1, pp: 2 });
    o.data.retries = 12;
    let t = std::thread::spawn(move || transfer(&o));
    common::wait_for_part_file(dst.path());
    std::thread::sleep(Duration::from_millis(300));
    drop(h); // every connection dies at once
    std::thread::sleep(Duration::from_millis(800));
    let _h2 = ServerHandle::start(cfg, &addr.to_string()).unwrap();
    let s = t
        .join()
        .unwrap()
        .expect("transfer finishes after the restart");
    common::assert_same_tree(src.path(), dst.path(), &rels);
    assert!(s.reconnects > 0, "the kill was noticed");
    assert_eq!(s.files_verified_checksum, 3);
}

/// A cancel mid-transfer ends it through the error path: partial data kept, the error says
/// how to resume, and nothing is renamed before it is complete.
#[test]
fn a_cancel_ends_the_transfer_with_its_partial_data_kept() {
    let src = tempfile::tempdir().unwrap();
    common::make_dataset(src.path(), &[("big.bin", 4_000_000)]);
    let mut cfg = ServerConfig::new(src.path());
    cfg.rate_limit = Some(1_000_000.0);
    let h = ServerHandle::start(cfg, "127.0.0.1:0").unwrap();
    let dst = tempfile::tempdir().unwrap();
    let mut o = opts(
        format!("http://{}/", h.addr),
        dst.path(),
        Sla::MaxThroughput,
    );
    o.tuning.tuner = TunerChoice::Fixed(FixedParams { cc: 1, p: 1, pp: 1 });
    let cancel = std::sync::Arc::new(wattio_progress::Cancel::new().unwrap());
    let stop = std::sync::Arc::clone(&cancel);
    let t = std::thread::spawn(move || run_transfer(&o, &stop));
    common::wait_for_part_file(dst.path());
    std::thread::sleep(Duration::from_millis(300));
    cancel.set();
    let err = t.join().unwrap().expect_err("cancelled");
    assert!(matches!(err, TransferError::Cancelled { .. }), "{err:?}");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("cancelled") && msg.contains("rerun the same command to resume"),
        "{msg}"
    );
    assert!(
        dst.path().join("big.bin.wattio-part").exists(),
        "partial data kept"
    );
    assert!(
        !dst.path().join("big.bin").exists(),
        "not renamed before complete"
    );
}

/// A transfer that gives up keeps its partial data; the next run resumes from it, fetches
/// only what is missing, and a corrupted finished range is caught by its block checksum and
/// fetched again.
#[test]
fn resume_after_failure_and_checksum_catches_corruption() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::make_dataset(src.path(), &[("big.bin", 4_000_000), ("small.bin", 50_000)]);
    let mut cfg = ServerConfig::new(src.path());
    cfg.rate_limit = Some(2_000_000.0);
    let h = ServerHandle::start(cfg, "127.0.0.1:0").unwrap();
    let addr = h.addr;
    let dst = tempfile::tempdir().unwrap();
    let mut o = opts(format!("http://{addr}/"), dst.path(), Sla::MaxThroughput);
    o.tuning.tuner = TunerChoice::Fixed(FixedParams { cc: 1, p: 2, pp: 1 });
    o.data.retries = 1;
    let o2 = o.clone();
    let t = std::thread::spawn(move || transfer(&o2));
    common::wait_for_part_file(dst.path());
    std::thread::sleep(Duration::from_millis(300));
    drop(h);
    let err = t.join().unwrap().expect_err("server gone for good");
    let msg = format!("{err:#}");
    assert!(msg.contains("rerun the same command to resume"), "{msg}");
    let part = dst.path().join("big.bin.wattio-part");
    assert!(part.exists(), "partial data kept");
    assert!(
        !dst.path().join("big.bin").exists(),
        "not renamed before complete"
    );
    // corrupt the first byte, which the first range already delivered
    let mut data = std::fs::read(&part).unwrap();
    data[0] ^= 0xff;
    std::fs::write(&part, &data).unwrap();

    let _h = ServerHandle::start(ServerConfig::new(src.path()), &addr.to_string()).unwrap();
    let s = transfer(&o).expect("second run");
    common::assert_same_tree(src.path(), dst.path(), &rels);
    assert!(s.resumed_bytes > 0, "{s:?}");
    // what was missing, and the corrupted first 1 MiB block once more: not the whole file
    assert_eq!(s.bytes, 4_050_000 - s.resumed_bytes + (1 << 20), "{s:?}");

    // a third run finds everything complete and moves nothing
    let s = transfer(&o).unwrap();
    assert_eq!((s.bytes, s.files_skipped), (0, 2));
}

/// Bytes that do not match the listing are caught as they arrive (block checksums computed in
/// the receive path), fetched once more, and never renamed into place.
#[test]
fn data_that_differs_from_the_listing_is_refused() {
    let src = tempfile::tempdir().unwrap();
    common::make_dataset(src.path(), &[("big.bin", 3_000_000)]);
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let mut o = opts(
        format!("http://{}/", h.addr),
        tempfile::tempdir().unwrap().path(),
        Sla::MaxThroughput,
    );
    o.tuning.tuner = TunerChoice::Fixed(FixedParams { cc: 1, p: 3, pp: 1 });
    let first = tempfile::tempdir().unwrap();
    o.data.dest = first.path().to_path_buf();
    transfer(&o).expect("the server lists and caches the checksums");
    // change one byte of the second block, keeping size and mtime: the server's cached listing
    // still has the old checksums
    let p = src.path().join("big.bin");
    let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
    let mut data = std::fs::read(&p).unwrap();
    data[1_500_000] ^= 0x55;
    std::fs::write(&p, &data).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let second = tempfile::tempdir().unwrap();
    o.data.dest = second.path().to_path_buf();
    let e = transfer(&o).expect_err("checksum must fail");
    assert!(
        matches!(&e, TransferError::ChecksumMismatch { file, .. } if file == "big.bin"),
        "{e:?}"
    );
    // fetched twice, refused, and the message names the fix (the listing is stale)
    let msg = format!("{e:#}");
    assert!(
        msg.contains("does not match the listing even after fetching it again")
            && msg.contains("--write-listing"),
        "{msg}"
    );
    assert!(!second.path().join("big.bin").exists());
}

#[test]
fn clear_errors() {
    let dst = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let e = transfer(&opts(
        format!("http://127.0.0.1:{port}/"),
        dst.path(),
        Sla::MinEnergy,
    ))
    .unwrap_err();
    assert!(matches!(e, TransferError::Unreachable { .. }), "{e:?}");
    assert!(format!("{e:#}").contains("is the server running"), "{e:#}");
    let e = transfer(&opts("ftp://x/".into(), dst.path(), Sla::MinEnergy)).unwrap_err();
    assert!(matches!(e, TransferError::Usage { .. }), "{e:?}");
    assert!(e.to_string().contains("only http://"));
    let src = tempfile::tempdir().unwrap();
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let e = transfer(&opts(
        format!("http://{}/missing.bin", h.addr),
        dst.path(),
        Sla::MinEnergy,
    ))
    .unwrap_err();
    assert!(matches!(e, TransferError::InvalidSource { .. }), "{e:?}");
    assert!(e.to_string().contains("HTTP 404"), "{e}");
    // a DEST that cannot be made: a file is in its way
    let file = dst.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let e = transfer(&opts(
        format!("http://{}/", h.addr),
        &file.join("d"),
        Sla::MinEnergy,
    ))
    .unwrap_err();
    assert!(matches!(e, TransferError::Dest { .. }), "{e:?}");
    assert!(e.to_string().contains("cannot create destination"), "{e}");
}

/// EETT on loopback, where one connection could go at memory speed: the client paces its
/// reads, so the run cannot beat the target by much (an upper bound that does not depend on
/// how busy the machine is; the lower bound is loose for the same reason).
#[test]
fn eett_paces_to_its_target_on_a_fast_path() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::make_dataset(src.path(), &[("a.bin", 3_000_000), ("b.bin", 3_000_000)]);
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let dst = tempfile::tempdir().unwrap();
    let target = 40e6; // 6 MB at 40 Mbit/s: 1.2 s
    let s = transfer(&opts(
        format!("http://{}/", h.addr),
        dst.path(),
        Sla::Target(target),
    ))
    .unwrap();
    common::assert_same_tree(src.path(), dst.path(), &rels);
    eprintln!(
        "EETT on loopback: {:.1} Mbit/s for a 40 Mbit/s target",
        s.throughput_bps / 1e6
    );
    assert!(
        s.throughput_bps <= 1.15 * target,
        "{} bit/s",
        s.throughput_bps
    );
    assert!(
        s.throughput_bps >= 0.5 * target,
        "{} bit/s",
        s.throughput_bps
    );
    assert!(s.intervals.iter().any(|i| i.rate_cap_mbps == Some(40.0)));
}

/// Resume bookkeeping on its own: a `.done` log with one valid record and a torn one resumes
/// exactly the recorded range; a part file of the wrong size is started afresh.
#[test]
fn resume_uses_done_records_and_discards_mismatched_parts() {
    let src = tempfile::tempdir().unwrap();
    let rels = common::make_dataset(src.path(), &[("a.bin", 1_000_000), ("b.bin", 500_000)]);
    let a = std::fs::read(src.path().join("a.bin")).unwrap();
    let h = ServerHandle::start(ServerConfig::new(src.path()), "127.0.0.1:0").unwrap();
    let dst = tempfile::tempdir().unwrap();
    // a.bin: first 400 000 bytes present and recorded, then a torn 7-byte record
    let mut part = a[..400_000].to_vec();
    part.resize(1_000_000, 0);
    std::fs::write(dst.path().join("a.bin.wattio-part"), &part).unwrap();
    let mut log = Vec::new();
    log.extend_from_slice(&0u64.to_le_bytes());
    log.extend_from_slice(&400_000u64.to_le_bytes());
    log.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    std::fs::write(dst.path().join("a.bin.wattio-part.done"), &log).unwrap();
    // b.bin: a part file of the wrong size with a record claiming everything
    std::fs::write(dst.path().join("b.bin.wattio-part"), vec![0xAA; 123]).unwrap();
    let mut log = Vec::new();
    log.extend_from_slice(&0u64.to_le_bytes());
    log.extend_from_slice(&500_000u64.to_le_bytes());
    std::fs::write(dst.path().join("b.bin.wattio-part.done"), &log).unwrap();

    let s = transfer(&opts(
        format!("http://{}/", h.addr),
        dst.path(),
        Sla::MaxThroughput,
    ))
    .unwrap();
    common::assert_same_tree(src.path(), dst.path(), &rels);
    assert_eq!(s.resumed_bytes, 400_000);
    assert_eq!(s.bytes, 600_000 + 500_000);
}
