//! hash
