//! wattio-power: see docs/architecture.md.
