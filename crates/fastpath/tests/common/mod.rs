//! Helpers shared by the live tests (`live_*.rs`): the root check, and a guard that stops the
//! `fastpath` child process by PID and removes its files on every exit path (also when an
//! assertion fails).
// Each test binary compiles its own copy of this module and uses only some of it.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// True when running as root. Otherwise the test is skipped (false), except in CI (`CI` set),
/// where a missing root is a failure.
pub fn root_or_skip() -> bool {
    if fastpath_io::sys::is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}

/// Owns a spawned `fastpath`: on drop, kills it by PID (SIGKILL) if it is still running, reaps
/// it, then removes the files given to [`ChildGuard::removing`].
pub struct ChildGuard {
    child: Child,
    files: Vec<PathBuf>,
}

impl ChildGuard {
    /// Guards `child`.
    pub fn new(child: Child) -> Self {
        ChildGuard { child, files: Vec::new() }
    }

    /// Also removes `path` on drop (after the child is gone).
    pub fn removing(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(path.into());
        self
    }

    /// The guarded child.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends SIGTERM first when `term`, then waits (at most 15 s) for the child to exit and
    /// returns its status, stdout and stderr (both must have been piped).
    pub fn stop(&mut self, term: bool) -> (ExitStatus, String, String) {
        let c = &mut self.child;
        if term {
            let st = Command::new("kill").args(["-TERM", &c.id().to_string()]).status().unwrap();
            assert!(st.success());
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "fastpath did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        let (mut out, mut err) = (String::new(), String::new());
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status, out, err)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}
