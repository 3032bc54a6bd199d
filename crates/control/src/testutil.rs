//! Fixtures shared by this crate's unit tests: one pipeline with a single port-indexed table,
//! `port_map` (key `meta.in_port`, actions `forward`/`drop`), applied at ingress. Each test
//! module picks the table size (how soon it fills up) and the default action.

use fastpath_pipeline::Pipeline;

/// The spec text of the `port_map` pipeline with `size` entries and `default` as the miss action.
pub(crate) fn port_map_spec(size: usize, default: &str) -> String {
    format!(
        r#"
name = "m"
[parser]
headers = ["eth"]
[[table]]
name = "port_map"
key = [{{ field = "meta.in_port", match = "exact" }}]
actions = ["forward", "drop"]
size = {size}
default = "{default}"
[control]
ingress = "apply port_map"
"#
    )
}

/// A fresh instance of the `port_map` pipeline (see [`port_map_spec`]).
pub(crate) fn port_map(size: usize, default: &str) -> Pipeline {
    fastpath_pipeline::compile("m.toml", &port_map_spec(size, default)).unwrap_or_else(|e| panic!("{e}")).instantiate()
}
