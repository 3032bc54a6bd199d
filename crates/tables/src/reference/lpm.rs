//! Reference twin: lpm
