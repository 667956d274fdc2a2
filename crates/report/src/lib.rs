//! wattio-report: see docs/architecture.md.
