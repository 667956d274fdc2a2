//! TODO-measure
