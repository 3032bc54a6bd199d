//! What the datapath's integration tests share.

use fastpath_io::sys::is_root;

/// True when the test may run (root: it loads programs and makes namespaces); off root it
/// prints why and skips, except under CI, which runs as root and must not skip.
pub fn root_or_skip() -> bool {
    if is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}
