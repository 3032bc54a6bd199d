//! Reference twin: meter
