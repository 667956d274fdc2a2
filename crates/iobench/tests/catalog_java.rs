//! The Rust catalog and the Java one (`io.wattio.iobench.Catalog`) list the same methods.
//! Builds the Maven module if its jar is stale (needs mvn and a JDK 17, installed by `make deps`).

use wattio_iobench::CATALOG_METHODS;
use wattio_iobench::{ensure_jar, find_maven_module, java_catalog, Libs};
use wattio_progress::Sink;

#[test]
fn rust_and_java_catalogs_agree() {
    let module = find_maven_module(None).expect("iobench/ module");
    let jar = ensure_jar(&module, Libs::Paper, &Sink::new(|m: &str| eprintln!("{m}")))
        .expect("building the jar");
    let java = java_catalog("java", &jar).expect("java catalog");
    let rust: Vec<(String, String, bool)> = CATALOG_METHODS
        .iter()
        .map(|m| (m.op.as_str().to_string(), m.name.to_string(), m.buffered))
        .collect();
    assert_eq!(java, rust);
}
