//! wattio-testbed: see docs/architecture.md.
