//! wattio-sim: see docs/architecture.md.
