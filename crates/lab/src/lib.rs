//! fastpath-lab
