//! fastpath-tm
