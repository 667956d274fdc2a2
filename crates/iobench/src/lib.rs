//! wattio-iobench: see docs/architecture.md.
