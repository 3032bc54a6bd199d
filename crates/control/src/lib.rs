//! fastpath-control
