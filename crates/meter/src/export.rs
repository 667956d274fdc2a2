//! TODO-export
