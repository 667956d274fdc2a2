//! wattio-cache: see docs/architecture.md.
