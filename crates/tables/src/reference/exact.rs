//! Reference twin: exact
