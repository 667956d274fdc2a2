//! Process CPU time from schedstat as the energy server reads it
//! (`wattio_energy::attribution::cputime::process_cpu_ns`), in a test binary of its own: threads
//! of other tests ending mid-measurement would take their CPU time out of the process total.

use wattio_energy::attribution::cputime::process_cpu_ns;
use wattio_energy::SysRoot;
use wattio_iobench::spin_cpu_ms;

#[test]
fn process_total_grows_by_the_cpu_this_thread_spent() {
    let pid = std::process::id();
    let root = SysRoot::new("/");
    let a = process_cpu_ns(&root, pid).unwrap();
    // 30 ms of this thread's CPU by the kernel's thread clock (not wall time: a loaded machine
    // only makes it slower).
    let spun = spin_cpu_ms(30);
    let b = process_cpu_ns(&root, pid).unwrap();
    assert!(
        b - a + 2_000_000 >= spun,
        "{a} -> {b}: less than the {spun} ns spun"
    );
    assert!(
        b - a < spun + 50_000_000,
        "{a} -> {b}: far more than the {spun} ns spun"
    );
    assert!(process_cpu_ns(&root, u32::MAX).is_err());
}
