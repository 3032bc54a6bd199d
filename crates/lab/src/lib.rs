//! fastpath-lab: the traffic generator, namespace topologies, test runners, baseline DUTs and
//! the HTML report with SVG charts. Uses `io` and `pipeline`.

pub mod report;
