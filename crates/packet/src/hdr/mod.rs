//! Typed zero-copy header views, one protocol per file.
