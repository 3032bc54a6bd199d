//! Reference twin: acl
