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
//! Requests are served one at a time, in order of arrival; a request's changes are applied as
//! described in [`crate::state`]. A connection that sends nothing for 30 s is dropped.

use crate::api::CtlError;
use crate::state::Control;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where sockets go by default: one per running `fastpath run`, named by its pid.
pub const SOCKET_DIR: &str = "/run/fastpath";

/// Longest request accepted (bytes): a bulk load of a few hundred thousand entries.
pub const MAX_REQUEST_BYTES: u64 = 256 << 20;

/// The default socket of this process: `/run/fastpath/<pid>.sock`.
pub fn default_socket_path() -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{}.sock", std::process::id()))
}

/// A bound control socket; the file is removed when it is dropped.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
}

impl Server {
    /// Binds `path` (creating its directory). A stale socket file nobody listens on is
    /// replaced; a live one is an error.
    ///
    /// # Errors
    /// When the directory cannot be created or the socket cannot be bound.
    pub fn bind(path: &Path) -> Result<Server, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("control socket directory {}: {e}", dir.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(format!("control socket {}: another fastpath is listening there (give --ctl another path)", path.display()));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path).map_err(|e| format!("control socket {}: {e}", path.display()))?;
        listener.set_nonblocking(true).map_err(|e| format!("control socket {}: {e}", path.display()))?;
        Ok(Server { listener, path: path.to_path_buf() })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests with `control` until `stop` is set (checked every 20 ms when idle).
    /// Control thread only (never a worker).
    pub fn serve_until(&self, control: &mut Control<'_>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((conn, _)) => {
                    if let Err(e) = serve_one(conn, control) {
                        eprintln!("fastpath: control connection: {e}");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    eprintln!("fastpath: control socket: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(mut conn: UnixStream, control: &mut Control<'_>) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    conn.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut req = Vec::new();
    (&mut conn).take(MAX_REQUEST_BYTES + 1).read_to_end(&mut req)?;
    let reply = if req.len() as u64 > MAX_REQUEST_BYTES {
        format!("error protocol\nrequest larger than {MAX_REQUEST_BYTES} bytes (split it)\n")
    } else {
        match std::str::from_utf8(&req) {
            Err(e) => format!("error protocol\nrequest is not UTF-8: {e}\n"),
            Ok(text) => match control.execute(text) {
                Ok(out) => format!("ok\n{out}"),
                Err(e) => format!("error {}\n{e}\n", e.code()),
            },
        }
    };
    conn.write_all(reply.as_bytes())?;
    conn.shutdown(Shutdown::Both)
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
            ErrorKind::PermissionDenied => {
                format!("{}: permission denied (run as the user that started fastpath, e.g. root)", path.display())
            }
            _ => format!("{}: {e}", path.display()),
        })
    })?;
    let proto = |e: std::io::Error| CtlError::Protocol(e.to_string());
    conn.set_read_timeout(Some(Duration::from_secs(120))).map_err(proto)?;
    conn.write_all(text.as_bytes()).map_err(proto)?;
    conn.shutdown(Shutdown::Write).map_err(proto)?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).map_err(proto)?;
    let (status, body) = reply.split_once('\n').unwrap_or((reply.as_str(), ""));
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
    use crate::mailbox::mailbox;

    fn pipe() -> fastpath_pipeline::Pipeline {
        crate::testutil::port_map(8, "drop")
    }

    #[test]
    fn a_request_round_trips_over_the_socket() {
        let dir = std::env::temp_dir().join(format!("fp-ctl-test-{}", std::process::id()));
        let path = dir.join("s.sock");
        let server = Server::bind(&path).unwrap();
        assert!(Server::bind(&path).err().unwrap().contains("another fastpath is listening"));
        let (c, mut w) = mailbox();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = pipe();
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |_| {});
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            s.spawn(|| {
                let mut control = Control::new(pipe(), Box::new(|| Ok(pipe())), vec![c]);
                server.serve_until(&mut control, &stop);
            });
            let out = request(&path, "table port_map add 1 => forward(0)\n").unwrap();
            assert!(out.contains("ok: 1 change(s) applied on 1 worker(s)"), "{out}");
            let e = request(&path, "table port_map add 1 => forwrd(0)\n").unwrap_err();
            assert_eq!(e.code(), "bad_command");
            assert!(e.to_string().contains("did you mean \"forward\""), "{e}");
            let out = request(&path, "show tables").unwrap();
            assert!(out.lines().any(|l| l.starts_with("port_map") && l.split_whitespace().nth(2) == Some("1")), "{out}");
            stop.store(true, Ordering::Relaxed);
        });
        drop(server);
        assert!(!path.exists(), "the socket file is removed");
        let e = request(&path, "show tables").unwrap_err();
        assert_eq!(e.code(), "not_listening");
        assert!(e.to_string().contains("no control socket at"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
