//! acl
