//! Reference twin: flow
