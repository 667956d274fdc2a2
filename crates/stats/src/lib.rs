//! wattio-stats: see docs/architecture.md.
