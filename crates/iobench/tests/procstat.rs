//! Process CPU time from schedstat, in a test binary of its own: threads of other tests ending
//! mid-measurement would take their CPU time out of the process total.

use std::path::Path;
use wattio_iobench::procstat::{process_cpu_ns, spin_cpu_ms};

#[test]
fn process_total_grows_by_the_cpu_this_thread_spent() {
    let pid = std::process::id();
    let a = process_cpu_ns(Path::new("/proc"), pid).unwrap();
    // 30 ms of this thread's CPU by the kernel's thread clock (not wall time: a loaded machine
    // only makes it slower).
    let spun = spin_cpu_ms(30);
    let b = process_cpu_ns(Path::new("/proc"), pid).unwrap();
    assert!(
        b - a + 2_000_000 >= spun,
        "{a} -> {b}: less than the {spun} ns spun"
    );
    assert!(
        b - a < spun + 50_000_000,
        "{a} -> {b}: far more than the {spun} ns spun"
    );
}
