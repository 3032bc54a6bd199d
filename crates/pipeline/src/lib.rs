//! fastpath-pipeline
