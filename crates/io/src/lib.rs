//! fastpath-io
