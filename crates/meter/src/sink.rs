//! TODO-sink
