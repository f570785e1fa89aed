//! CRD structural schema engine.
