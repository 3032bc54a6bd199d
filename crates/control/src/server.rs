//! The control socket: a unix-domain stream socket served by a control thread, and its client.
//!
//! Protocol (line-based text, one request per connection):
//!
//! ```text
//!  client ─▶ command lines (UTF-8), then shuts down its write half (EOF ends the request)
//!  server ─▶ "ok\n" followed by the output          (exit status 0)
//!         or "error CODE\n" followed by the message  (CODE: bad_command, rejected, worker, …)
//!  server closes the connection.
//! ```
//! Clients are served concurrently, each on a thread of its own (at most
//! [`MAX_CONNECTIONS`]; one more is answered `error busy`). A request is read in full first —
//! at most [`MAX_REQUEST_BYTES`], within [`REQUEST_TIMEOUT`] — and only then takes the
//! [`Control`] to run (requests run one at a time, in the order they became complete; a
//! request's changes are applied as described in [`crate::state`]). So a client that connects
//! and sends nothing, or sends slowly, delays nobody but itself (see [`crate::conn`]).
//!
//! **Access.** Whoever can connect can rewrite the tables, so the socket is created mode 0600
//! (owner only), or 0660 with a group ([`Access::group`], `fastpath run --ctl-group`), whatever
//! the process's umask. It is bound in a private staging directory (0700), given its mode and
//! group there, and only then renamed into place, so there is no moment at which it is reachable
//! with the umask's mode. A socket directory this creates — and the default [`SOCKET_DIR`],
//! which belongs to fastpath — is set to 0700 (0750 with a group); a directory the user named
//! that already exists (`/tmp`) is left as it is.

use crate::api::CtlError;
use crate::conn::{self, Limits, ReadEnd};
use crate::state::Control;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where sockets go by default: one per running `fastpath run`, named by its pid.
pub const SOCKET_DIR: &str = "/run/fastpath";

/// Longest request accepted (bytes): a bulk load of a few hundred thousand entries.
pub const MAX_REQUEST_BYTES: usize = 256 << 20;

/// Time a client has to send its whole request (and to take the reply).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// The default socket of this process: `/run/fastpath/<pid>.sock`.
pub fn default_socket_path() -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{}.sock", std::process::id()))
}

/// Who may use the control socket besides its owner.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// A group whose members may connect too (socket 0660, directory 0750); `None`: the owner
    /// only (socket 0600, directory 0700).
    pub group: Option<u32>,
}

impl Access {
    /// Access for the group `name` (a name from `/etc/group`, or a numeric gid).
    ///
    /// # Errors
    /// When no such group exists (local groups only: `/etc/group`).
    pub fn group(name: &str) -> Result<Access, String> {
        if let Ok(gid) = name.parse::<u32>() {
            return Ok(Access { group: Some(gid) });
        }
        let text = std::fs::read_to_string("/etc/group").map_err(|e| format!("--ctl-group {name}: /etc/group: {e}"))?;
        gid_of(&text, name)
            .map(|gid| Access { group: Some(gid) })
            .ok_or_else(|| format!("--ctl-group {name}: no such group in /etc/group (give a group name or a numeric gid)"))
    }

    fn socket_mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }

    fn dir_mode(&self) -> u32 {
        if self.group.is_some() {
            0o750
        } else {
            0o700
        }
    }

    /// Sets `path`'s mode (not subject to the umask) and group.
    fn apply(&self, path: &Path, mode: u32) -> Result<(), String> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("chmod {mode:o} {}: {e}", path.display()))?;
        if let Some(gid) = self.group {
            std::os::unix::fs::chown(path, None, Some(gid)).map_err(|e| format!("chgrp {gid} {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// The gid of group `name` in `/etc/group`-format `text` (`name:password:gid:members`).
fn gid_of(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next() == Some(name)).then(|| f.nth(1).and_then(|g| g.trim().parse().ok())).flatten()
    })
}

/// A bound control socket; the file is removed when it is dropped.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    limits: Limits,
}

/// Binds a unix stream socket at `path` with the modes of `access` whatever the umask (the
/// module docs: staged in a private directory, given its mode and group, then renamed into
/// place), creating its directory. A stale socket file nobody listens on is replaced; a live one
/// is an error. Shared by every front end that listens on a unix socket (the ctl socket,
/// P4Runtime). The listener is blocking.
///
/// # Errors
/// When the directory cannot be created, the socket cannot be bound, or its mode or group
/// cannot be set; the message names the path.
pub fn bind_socket(path: &Path, access: &Access) -> Result<UnixListener, String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| format!("control socket {}: not a file name", path.display()))?;
    let dir_err = |e: String| format!("control socket directory {}: {e}", dir.display());
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(access.dir_mode()).create(dir).map_err(|e| dir_err(e.to_string()))?;
        access.apply(dir, access.dir_mode()).map_err(dir_err)?;
    } else if dir == Path::new(SOCKET_DIR) {
        // Ours: an earlier run (or another umask) may have left it open.
        access.apply(dir, access.dir_mode()).map_err(dir_err)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(format!("control socket {}: another fastpath is listening there (give --ctl another path)", path.display()));
        }
        let _ = std::fs::remove_file(path);
    }
    // Bind where nobody else can reach it, set mode and group, then move it into place.
    let staging = dir.join(format!(".{}.{}", name.to_string_lossy(), std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let err = |e: String| format!("control socket {}: {e}", path.display());
    std::fs::DirBuilder::new().mode(0o700).create(&staging).map_err(|e| err(format!("staging directory {}: {e}", staging.display())))?;
    let bound = (|| {
        std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o700)).map_err(|e| e.to_string())?;
        let tmp = staging.join("s");
        let listener = UnixListener::bind(&tmp).map_err(|e| e.to_string())?;
        access.apply(&tmp, access.socket_mode())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
        Ok::<_, String>(listener)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    bound.map_err(err)
}

impl Server {
    /// Binds `path` for the owner only (see [`Server::bind_with`]).
    ///
    /// # Errors
    /// As [`Server::bind_with`].
    pub fn bind(path: &Path) -> Result<Server, String> {
        Server::bind_with(path, &Access::default())
    }

    /// Binds `path` with the modes of `access`, whatever the umask (module docs), creating its
    /// directory. A stale socket file nobody listens on is replaced; a live one is an error.
    ///
    /// # Errors
    /// When the directory cannot be created, the socket cannot be bound, or its mode or group
    /// cannot be set.
    pub fn bind_with(path: &Path, access: &Access) -> Result<Server, String> {
        let listener = bind_socket(path, access)?;
        listener.set_nonblocking(true).map_err(|e| format!("control socket {}: {e}", path.display()))?;
        let limits = Limits { max_conns: MAX_CONNECTIONS, max_request_bytes: MAX_REQUEST_BYTES, timeout: REQUEST_TIMEOUT };
        Ok(Server { listener, path: path.to_path_buf(), limits })
    }

    /// Replaces the default limits ([`MAX_CONNECTIONS`], [`MAX_REQUEST_BYTES`],
    /// [`REQUEST_TIMEOUT`]).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests with `control` until `stop` is set: one thread per connection (module
    /// docs). Returns once every connection has ended (within 100 ms of `stop` for those still
    /// sending). Runs on the control thread (never a worker).
    pub fn serve_until(&self, control: &Mutex<Control<'_>>, stop: &AtomicBool) {
        let limits = self.limits;
        conn::serve(
            "fp-ctl-conn",
            &limits,
            stop,
            &self.listener,
            || self.listener.accept().map(|(c, _)| c),
            |c| conn::refuse(c, format!("error busy\n{} control connections are open; try again\n", limits.max_conns).as_bytes()),
            |c| {
                if let Err(e) = serve_one(c, control, &limits, stop) {
                    eprintln!("fastpath: control connection: {e}");
                }
            },
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads one request in full, runs it with the Control held only while it runs, then replies.
fn serve_one(mut conn: UnixStream, control: &Mutex<Control<'_>>, limits: &Limits, stop: &AtomicBool) -> std::io::Result<()> {
    let mut req = Vec::new();
    let reply = match conn::read_request(&mut conn, &mut req, limits, stop, |_| false)? {
        ReadEnd::Stopped => return Ok(()),
        ReadEnd::TooLarge => format!(
            "error protocol\nrequest larger than {} bytes: refused, nothing of it was applied (split it into several requests)\n",
            limits.max_request_bytes
        ),
        ReadEnd::TimedOut => format!(
            "error protocol\nrequest not complete after {:?}: refused, nothing of it was applied (a client ends its request by \
             shutting down its write half)\n",
            limits.timeout
        ),
        ReadEnd::Complete => match std::str::from_utf8(&req) {
            Err(e) => format!("error protocol\nrequest is not UTF-8: {e}\n"),
            Ok(text) => {
                let received = Instant::now();
                let (result, stamps, log, locked) = {
                    let mut c = control.lock().unwrap_or_else(PoisonError::into_inner);
                    let locked = Instant::now();
                    let _ = c.take_apply_stamps();
                    let result = c.execute(text);
                    (result, c.take_apply_stamps(), c.write_log(), locked)
                };
                let reply = match result {
                    Ok(out) => format!("ok\n{out}"),
                    Err(e) => format!("error {}\n{e}\n", e.code()),
                };
                // A request that changed the tables: where its time went (`show writes`).
                if let Some(s) = stamps {
                    log.push(received, locked, &s, Instant::now());
                }
                reply
            }
        },
    };
    conn::reply_and_close(&mut conn, reply.as_bytes(), limits)
}

/// Sends one request to the socket at `path` and returns the server's output.
///
/// # Errors
/// [`CtlError::NotListening`] when nothing listens (with what to try), [`CtlError::Protocol`]
/// when the conversation fails, or the server's error as [`CtlError::Remote`].
pub fn request(path: &Path, text: &str) -> Result<String, CtlError> {
    let mut conn = UnixStream::connect(path).map_err(|e| {
        CtlError::NotListening(match e.kind() {
            ErrorKind::NotFound => format!(
                "no control socket at {} (is `fastpath run` running with live ports? it prints its socket at start)",
                path.display()
            ),
            ErrorKind::ConnectionRefused => format!("nothing listens on {} (a stale socket of a fastpath that stopped?)", path.display()),
            ErrorKind::PermissionDenied => format!(
                "{}: permission denied (run as the user that started fastpath, e.g. root, or as a member of its --ctl-group)",
                path.display()
            ),
            _ => format!("{}: {e}", path.display()),
        })
    })?;
    let proto = |e: std::io::Error| CtlError::Protocol(e.to_string());
    conn.set_read_timeout(Some(Duration::from_secs(120))).map_err(proto)?;
    // A server that refuses a request (too large, busy) replies and closes without reading it
    // all: the write may fail and the read end in a reset, but the reply, written in full
    // before the close, is read first.
    let sent = conn.write_all(text.as_bytes()).and_then(|()| conn.shutdown(Shutdown::Write));
    let mut reply = Vec::new();
    if let Err(e) = conn.read_to_end(&mut reply) {
        if reply.is_empty() {
            return Err(proto(sent.err().unwrap_or(e)));
        }
    }
    let reply = String::from_utf8_lossy(&reply);
    let (status, body) = reply.split_once('\n').unwrap_or((&reply, ""));
    if status == "ok" {
        return Ok(body.to_string());
    }
    match status.strip_prefix("error ") {
        Some(code) => Err(CtlError::Remote { code: code.to_string(), msg: body.trim_end().to_string() }),
        None => Err(CtlError::Protocol(format!("unexpected reply \"{status}\""))),
    }
}

/// The sockets of running `fastpath run` processes in [`SOCKET_DIR`] (stale ones, whose
/// process is gone, are skipped).
pub fn running_sockets() -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(SOCKET_DIR) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .filter(|p| {
            let pid = p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<u32>().ok());
            pid.is_none_or(|pid| Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::{mailbox, WorkerEnd};
    use std::os::unix::fs::MetadataExt;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    fn pipe() -> fastpath_pipeline::Pipeline {
        crate::testutil::port_map(8, "drop")
    }

    fn temp_dir(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("fp-ctl-{tag}-{}", std::process::id()))
    }

    /// Serves `server` with a control plane over one polling worker while `f` runs.
    fn serving<R>(server: &Server, f: impl FnOnce() -> R) -> R {
        let (c, mut w): (_, WorkerEnd) = mailbox();
        let stop = AtomicBool::new(false);
        let control = Mutex::new(Control::new(pipe(), Box::new(|| Ok(pipe())), vec![c]));
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = pipe();
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |_| {});
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            s.spawn(|| server.serve_until(&control, &stop));
            /// Stops the threads also when `f` fails an assertion, so the scope ends.
            struct StopOnDrop<'s>(&'s AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _guard = StopOnDrop(&stop);
            f()
        })
    }

    #[test]
    fn a_request_round_trips_over_the_socket() {
        let dir = temp_dir("rt");
        let path = dir.join("s.sock");
        let server = Server::bind(&path).unwrap();
        assert!(Server::bind(&path).err().unwrap().contains("another fastpath is listening"));
        serving(&server, || {
            let out = request(&path, "table port_map add 1 => forward(0)\n").unwrap();
            assert!(out.contains("ok: 1 change(s) applied on 1 worker(s)"), "{out}");
            let e = request(&path, "table port_map add 1 => forwrd(0)\n").unwrap_err();
            assert_eq!(e.code(), "bad_command");
            assert!(e.to_string().contains("did you mean \"forward\""), "{e}");
            let out = request(&path, "show tables").unwrap();
            assert!(out.lines().any(|l| l.starts_with("port_map") && l.split_whitespace().nth(2) == Some("1")), "{out}");
            // Only the request that changed the tables was timed, at every stage.
            let out = request(&path, "show writes").unwrap();
            assert!(out.starts_with("writes timed: 1 "), "{out}");
            let total = out.lines().find(|l| l.starts_with("total")).unwrap_or_else(|| panic!("{out}"));
            let p50: u64 = total.split_whitespace().rev().nth(2).unwrap().parse().unwrap();
            assert!(p50 > 0, "{out}");
            assert_eq!(out.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).count(), 9, "{out}");
        });
        drop(server);
        assert!(!path.exists(), "the socket file is removed");
        let e = request(&path, "show tables").unwrap_err();
        assert_eq!(e.code(), "not_listening");
        assert!(e.to_string().contains("no control socket at"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 18: one idle client froze every other request for the 30 s read timeout. Now an
    /// idle client and one that stalls half-way through its request hold only their own
    /// connections; others are served at once, and the stalled one still completes later.
    #[test]
    fn idle_and_stalled_clients_do_not_hold_up_other_requests() {
        let dir = temp_dir("idle");
        let path = dir.join("s.sock");
        let server = Server::bind(&path).unwrap();
        serving(&server, || {
            let _idle = UnixStream::connect(&path).unwrap();
            let mut stalled = UnixStream::connect(&path).unwrap();
            stalled.write_all(b"table port_map add 2 => ").unwrap();
            let t0 = Instant::now();
            let out = request(&path, "show counters").unwrap();
            assert!(out.contains("stage"), "{out}");
            let out = request(&path, "table port_map add 1 => forward(0)").unwrap();
            assert!(out.contains("ok: 1 change(s)"), "{out}");
            // Before the fix each of these waited out the 30 s timeout of the idle client.
            assert!(t0.elapsed() < Duration::from_secs(10), "took {:?} next to an idle client", t0.elapsed());
            stalled.write_all(b"forward(1)\n").unwrap();
            stalled.shutdown(Shutdown::Write).unwrap();
            let mut reply = String::new();
            stalled.read_to_string(&mut reply).unwrap();
            assert!(reply.starts_with("ok\nok: 1 change(s)"), "{reply}");
            let out = request(&path, "show tables").unwrap();
            assert!(out.lines().any(|l| l.starts_with("port_map") && l.split_whitespace().nth(2) == Some("2")), "{out}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_over_long_request_and_one_connection_too_many_are_refused() {
        let dir = temp_dir("limits");
        let path = dir.join("s.sock");
        let limits = Limits { max_conns: 2, max_request_bytes: 1024, timeout: REQUEST_TIMEOUT };
        let server = Server::bind(&path).unwrap().with_limits(limits);
        serving(&server, || {
            // First, while no other connection can still be counted: two held, the third refused.
            let held = [UnixStream::connect(&path).unwrap(), UnixStream::connect(&path).unwrap()];
            let e = request(&path, "show tables").unwrap_err();
            assert_eq!(e.code(), "busy", "{e}");
            assert!(e.to_string().contains("2 control connections are open"), "{e}");
            drop(held);
            // The slots come back once the held connections end. A slot is also given back
            // only after its reply is sent, so a client that has its answer may still find the
            // server busy for a moment: every later request waits that out.
            let when_free = |text: &str| {
                let t0 = Instant::now();
                loop {
                    match request(&path, text) {
                        Err(e) if e.code() == "busy" && t0.elapsed() < Duration::from_secs(10) => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        other => break other,
                    }
                }
            };
            let out = when_free("show tables").unwrap();
            assert!(out.lines().any(|l| l.starts_with("port_map")), "{out}");
            let long = "table port_map add 1 => forward(0)\n".repeat(100);
            let e = when_free(&long).unwrap_err();
            assert_eq!(e.code(), "protocol", "{e}");
            assert!(e.to_string().contains("request larger than 1024 bytes: refused, nothing of it was applied"), "{e}");
            let out = when_free("show tables").unwrap();
            assert!(out.lines().any(|l| l.starts_with("port_map") && l.split_whitespace().nth(2) == Some("0")), "nothing applied: {out}");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn groups_are_found_by_name_or_number() {
        let text = "root:x:0:\nfastpath:x:1234:alice,bob\nbad:x:nope:\n";
        assert_eq!(gid_of(text, "fastpath"), Some(1234));
        assert_eq!(gid_of(text, "fast"), None);
        assert_eq!(gid_of(text, "bad"), None);
        assert_eq!(Access::group("4321").unwrap().group, Some(4321));
        assert!(Access::group("no-such-group-fp").unwrap_err().contains("no such group"));
    }

    /// A field of `/proc/self/status` (e.g. `Umask:`).
    fn status(field: &str) -> String {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        s.lines().find_map(|l| l.strip_prefix(field)).unwrap().trim().to_string()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o7777
    }

    /// Issue 18: under umask 000 the socket was srwxrwxrwx. This test runs its check
    /// ([`socket_modes_under_the_callers_umask`]) in a child process started with umask 000.
    #[test]
    fn the_socket_and_its_directory_are_private_under_umask_000() {
        let dir = temp_dir("umask");
        let _ = std::fs::remove_dir_all(&dir);
        let out = std::process::Command::new("sh")
            .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
            .arg(std::env::current_exe().unwrap())
            .args(["server::tests::socket_modes_under_the_callers_umask", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env("FP_UMASK_DIR", &dir)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("checked under umask 0000"), "the check did not run: {text}");
    }

    /// The child of [`the_socket_and_its_directory_are_private_under_umask_000`] (does nothing
    /// when run on its own).
    #[test]
    #[ignore = "run by the_socket_and_its_directory_are_private_under_umask_000"]
    fn socket_modes_under_the_callers_umask() {
        let Some(dir) = std::env::var_os("FP_UMASK_DIR").map(PathBuf::from) else { return };
        let umask = status("Umask:");
        // Owner only.
        let path = dir.join("own").join("s.sock");
        let server = Server::bind(&path).unwrap();
        assert_eq!(mode(&path), 0o600, "socket");
        assert_eq!(mode(path.parent().unwrap()), 0o700, "directory");
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no staging directory is left");
        serving(&server, || assert!(request(&path, "show tables").is_ok()));
        // With a group (our own effective gid, which any user may give).
        let gid: u32 = status("Gid:").split_whitespace().nth(1).unwrap().parse().unwrap();
        let path = dir.join("grp").join("s.sock");
        let _server = Server::bind_with(&path, &Access { group: Some(gid) }).unwrap();
        assert_eq!(mode(&path), 0o660, "socket");
        assert_eq!(mode(path.parent().unwrap()), 0o750, "directory");
        assert_eq!((std::fs::metadata(&path).unwrap().gid(), std::fs::metadata(path.parent().unwrap()).unwrap().gid()), (gid, gid));
        println!("checked under umask {umask}");
    }
}
