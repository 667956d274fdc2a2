//! wattio-transfer: see docs/architecture.md.
