//! TODO-sampler
