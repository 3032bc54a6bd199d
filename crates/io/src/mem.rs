//! mem
