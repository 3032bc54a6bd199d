//! The gRPC server: tonic on a tokio runtime of its own, next to the control thread.
//!
//! ```text
//!  P4Runtime clients ──unix socket / TCP (TLS)──▶ tokio runtime (1 thread): decode, arbitration
//!                                                   │ jobs (a closure and a reply channel)
//!                                                   ▼
//!                   the p4rt thread: takes the Mutex<Control> for each job (Write, Read, …)
//! ```
//! The handlers never hold the [`Control`]: they send a job to the p4rt thread, which runs it
//! under the shared `Mutex<Control>` (the lock `fastpath ctl`, the metrics and the web page
//! take too) and answers through a oneshot channel. So a slow or idle client holds nothing.

use crate::arbitration::{Arbiter, Clash, StreamId};
use crate::ops::{self, KeyCache};
use crate::packet::{self, PacketIo, PuntedFrame};
use crate::proto::{self, stream_message_request::Update as In, stream_message_response::Update as Out};
use crate::{p4info, P4RUNTIME_VERSION};
use fastpath_control::{Access, Control};
use fastpath_pipeline::Program;
use prost::Message as _;
use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

/// The generated service (tonic-build's manual builder, `build.rs`).
pub mod generated {
    include!(concat!(env!("OUT_DIR"), "/p4.v1.P4Runtime.rs"));
}

use generated::p4_runtime_server::{P4Runtime, P4RuntimeServer};

/// Largest request accepted (a batch of some 100k updates).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Entities per `ReadResponse` message of a `Read` stream.
const READ_CHUNK: usize = 4096;

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket (mode 0600, or 0660 with a group, whatever the umask).
    Unix(PathBuf),
    /// TCP, e.g. `127.0.0.1:9559`.
    Tcp(std::net::SocketAddr),
}

impl Listen {
    /// Parses `--p4rt ADDR`: `unix:PATH` or a path (with a `/`) for a unix socket, `IP:PORT` for
    /// TCP.
    ///
    /// # Errors
    /// Anything else, with the forms expected.
    pub fn parse(addr: &str) -> Result<Listen, String> {
        if let Some(p) = addr.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("--p4rt {addr}: unix: needs a path, e.g. unix:/run/fastpath/p4rt.sock"));
            }
            return Ok(Listen::Unix(p.into()));
        }
        if let Ok(sa) = addr.parse() {
            return Ok(Listen::Tcp(sa));
        }
        if addr.contains('/') {
            return Ok(Listen::Unix(addr.into()));
        }
        Err(format!(
            "--p4rt {addr}: expected a unix socket (unix:PATH, or a path with a '/') or a TCP address IP:PORT, e.g. 127.0.0.1:9559"
        ))
    }

    /// The address as gRPC clients write it (`unix:PATH`, `IP:PORT`).
    pub fn client_addr(&self) -> String {
        match self {
            Listen::Unix(p) => format!("unix:{}", p.display()),
            Listen::Tcp(a) => a.to_string(),
        }
    }
}

/// What the server serves.
#[derive(Clone, Debug)]
pub struct Config {
    /// The device id clients must name (p4runtime-shell's default is 1).
    pub device_id: u64,
    /// The spec file's text: the device config (`p4_device_config`).
    pub spec_text: String,
    /// Number of ports (packet-outs to others are refused).
    pub ports: usize,
}

/// A bound listener, before serving.
enum Bound {
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Tcp(std::net::TcpListener),
}

/// A bound P4Runtime server; the unix socket is removed when it is dropped.
pub struct Server {
    bound: Bound,
    tls: Option<tonic::transport::Identity>,
    listen: Listen,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Bound::Unix(_, p) = &self.bound {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Server {
    /// Binds `listen` (a unix socket with `access`'s modes; TCP with TLS when `tls` names a
    /// PEM certificate chain and key).
    ///
    /// # Errors
    /// The socket cannot be bound, or the certificate or key cannot be read; TLS on a unix
    /// socket.
    pub fn bind(listen: &Listen, access: &Access, tls: Option<(PathBuf, PathBuf)>) -> Result<Server, String> {
        let tls = match tls {
            None => None,
            Some((cert, key)) => {
                if matches!(listen, Listen::Unix(_)) {
                    return Err("--p4rt-cert/--p4rt-key: TLS is for TCP listeners; a unix socket is protected by its mode".into());
                }
                let read = |p: &PathBuf, what: &str| std::fs::read(p).map_err(|e| format!("--p4rt-{what} {}: {e}", p.display()));
                Some(tonic::transport::Identity::from_pem(read(&cert, "cert")?, read(&key, "key")?))
            }
        };
        let bound = match listen {
            Listen::Unix(p) => {
                let l = fastpath_control::bind_socket(p, access).map_err(|e| format!("--p4rt: {e}"))?;
                l.set_nonblocking(true).map_err(|e| format!("--p4rt {}: {e}", p.display()))?;
                Bound::Unix(l, p.clone())
            }
            Listen::Tcp(a) => {
                let l = std::net::TcpListener::bind(a).map_err(|e| format!("--p4rt {a}: {e}"))?;
                l.set_nonblocking(true).map_err(|e| format!("--p4rt {a}: {e}"))?;
                Bound::Tcp(l)
            }
        };
        Ok(Server { bound, tls, listen: listen.clone() })
    }

    /// Where it listens, as clients write it (a TCP port 0 resolved).
    pub fn client_addr(&self) -> String {
        match &self.bound {
            Bound::Tcp(l) => l.local_addr().map_or_else(|_| self.listen.client_addr(), |a| a.to_string()),
            Bound::Unix(..) => self.listen.client_addr(),
        }
    }

    /// True when it serves TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A warning for a plaintext TCP listener reachable from other hosts: whoever can connect
    /// can rewrite the tables.
    pub fn exposure(&self) -> Option<String> {
        exposure(&self.listen, self.tls.is_some())
    }

    /// Serves P4Runtime over `control` until `stop` is set, on this thread (control jobs) and a
    /// one-thread tokio runtime it starts (the gRPC connections). Packet-ins come from `io`'s
    /// workers. Control thread (never a worker).
    ///
    /// # Errors
    /// The runtime could not start, or the server failed.
    pub fn serve_until(&self, cfg: Config, io: &PacketIo, control: &Mutex<Control<'_>>, stop: &AtomicBool) -> Result<(), String> {
        let prog: Program = control.lock().unwrap_or_else(PoisonError::into_inner).pipeline_info().clone();
        let loaded = Loaded {
            spec_text: cfg.spec_text.clone(),
            name: prog.name.clone(),
            p4info: p4info::p4info(&prog, ""),
            cookie: None,
            saved: None,
        };
        let (jobs_tx, jobs_rx) = std::sync::mpsc::channel::<Job>();
        let end = io.server_end().ok_or("the packet-in channel was taken already")?;
        let shared = Arc::new(Shared {
            cfg,
            loaded: Mutex::new(loaded),
            jobs: jobs_tx,
            state: Mutex::new(State::default()),
            out: end.out,
            stats: end.stats,
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fp-p4rt-io")
            .enable_all()
            .build()
            .map_err(|e| format!("p4rt: tokio runtime: {e}"))?;
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let svc = P4RuntimeServer::new(Service { shared: shared.clone() })
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let mut builder = tonic::transport::Server::builder();
        if let Some(id) = &self.tls {
            builder =
                builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(id.clone())).map_err(|e| format!("p4rt: TLS: {e}"))?;
        }
        let router = builder.add_service(svc);
        let signal = async {
            let _ = shutdown_rx.await;
        };
        let server = {
            let _guard = rt.enter();
            match &self.bound {
                Bound::Unix(l, _) => {
                    let l = l.try_clone().map_err(|e| e.to_string())?;
                    let l = tokio::net::UnixListener::from_std(l).map_err(|e| format!("p4rt: {e}"))?;
                    rt.spawn(router.serve_with_incoming_shutdown(tokio_stream::wrappers::UnixListenerStream::new(l), signal))
                }
                Bound::Tcp(l) => {
                    let l = l.try_clone().map_err(|e| e.to_string())?;
                    let l = tokio::net::TcpListener::from_std(l).map_err(|e| format!("p4rt: {e}"))?;
                    rt.spawn(router.serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(l), signal))
                }
            }
        };
        rt.spawn(forward_punts(shared.clone(), end.punts));
        // The control jobs, on this thread, until stopped.
        let mut cache = KeyCache::default();
        while !stop.load(Ordering::Relaxed) {
            match jobs_rx.recv_timeout(Duration::from_millis(100)) {
                Ok(job) => {
                    let mut c = control.lock().unwrap_or_else(PoisonError::into_inner);
                    job(&mut c, &mut cache);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if server.is_finished() {
                break;
            }
        }
        let _ = shutdown_tx.send(());
        // Streams still open end with the runtime.
        let result = if server.is_finished() { rt.block_on(server) } else { Ok(Ok(())) };
        rt.shutdown_timeout(Duration::from_secs(1));
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("p4rt server: {e}")),
            Err(e) => Err(format!("p4rt server task: {e}")),
        }
    }
}

/// See [`Server::exposure`].
fn exposure(listen: &Listen, tls: bool) -> Option<String> {
    match listen {
        Listen::Tcp(a) if !tls && !a.ip().is_loopback() => Some(format!(
            "P4Runtime on {a} without TLS: anyone who can reach it can rewrite the tables (give --p4rt-cert and --p4rt-key, or listen on a unix socket or loopback)"
        )),
        _ => None,
    }
}

/// Work for the control thread: runs with the control plane locked.
type Job = Box<dyn for<'c> FnOnce(&mut Control<'c>, &mut KeyCache) + Send>;

/// What the handlers share.
struct Shared {
    cfg: Config,
    /// The running pipeline as clients see it; replaced by a commit of a new spec.
    loaded: Mutex<Loaded>,
    jobs: std::sync::mpsc::Sender<Job>,
    state: Mutex<State>,
    out: packet::OutQueue,
    stats: Arc<packet::PacketStats>,
}

type StreamTx = mpsc::Sender<Result<proto::StreamMessageResponse, Status>>;

/// Arbitration and the open streams.
#[derive(Default)]
struct State {
    arbiter: Arbiter,
    streams: HashMap<StreamId, StreamTx>,
    next: StreamId,
}

/// The running pipeline's config, and one saved by `VERIFY_AND_SAVE` for a later `COMMIT`.
struct Loaded {
    /// The spec text (`p4_device_config`).
    spec_text: String,
    /// Its name, for messages.
    name: String,
    p4info: proto::P4Info,
    cookie: Option<u64>,
    saved: Option<(Verified, Option<u64>)>,
}

/// A config that passed verification.
#[derive(Clone)]
enum Verified {
    /// The running pipeline.
    Same,
    /// A new pipeline: its spec text and the P4Info generated from it.
    New(String, String, Box<proto::P4Info>),
}

impl Shared {
    /// Runs `f` on the control thread with the control plane locked.
    async fn on_control<R: Send + 'static>(
        &self,
        f: impl for<'c> FnOnce(&mut Control<'c>, &mut KeyCache) -> R + Send + 'static,
    ) -> Result<R, Status> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |c, k| {
            let _ = tx.send(f(c, k));
        });
        self.jobs.send(job).map_err(|_| Status::unavailable("the data plane is stopping"))?;
        rx.await.map_err(|_| Status::unavailable("the data plane is stopping"))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `v` the running pipeline: a new spec replaces the pipeline on every worker (its
    /// tables start empty); the running one stays as it is, entries included.
    async fn commit(&self, v: Verified, cookie: Option<u64>) -> Result<(), Status> {
        if let Verified::New(name, text, info) = v {
            let spec = text.clone();
            self.on_control(move |c, keys| {
                let r = c.reload_spec("p4_device_config", &spec);
                *keys = KeyCache::default();
                r
            })
            .await?
            .map_err(|e| match e {
                fastpath_control::CtlError::Reload(m) => Status::invalid_argument(format!("p4_device_config: {m}")),
                other => Status::internal(format!("reloading the pipeline: {other}")),
            })?;
            let mut l = self.loaded();
            (l.spec_text, l.name, l.p4info) = (text, name, *info);
        }
        self.loaded().cookie = cookie;
        Ok(())
    }

    fn check_device(&self, id: u64) -> Result<(), Status> {
        if id != self.cfg.device_id {
            return Err(Status::not_found(format!("no device {id}: this is device {}", self.cfg.device_id)));
        }
        Ok(())
    }

    fn check_role(&self, role: &str, role_id: u64) -> Result<(), Status> {
        if !role.is_empty() || role_id != 0 {
            return Err(Status::unimplemented(format!("roles are not supported (got role \"{role}\" id {role_id}); use the default role")));
        }
        Ok(())
    }

    fn check_primary(&self, election: Option<proto::Uint128>) -> Result<(), Status> {
        let st = self.state();
        if st.arbiter.is_primary_election(election) {
            return Ok(());
        }
        let show = |e: Option<proto::Uint128>| e.map_or("none".to_string(), |e| format!("(high {}, low {})", e.high, e.low));
        Err(Status::permission_denied(format!(
            "not the primary: election id {} is not the primary's, {} (open a StreamChannel and arbitrate with a higher one)",
            show(election),
            show(st.arbiter.primary().map(|p| p.1))
        )))
    }

    /// Tells streams about an arbitration change.
    fn tell(&self, st: &State, verdicts: &[crate::arbitration::Verdict]) {
        for v in verdicts {
            if let Some(tx) = st.streams.get(&v.stream) {
                let status = if v.is_primary {
                    proto::RpcStatus { code: Code::Ok as i32, message: "you are the primary".into(), details: Vec::new() }
                } else {
                    proto::RpcStatus {
                        code: Code::AlreadyExists as i32,
                        message: "another controller is the primary".into(),
                        details: Vec::new(),
                    }
                };
                let m = proto::MasterArbitrationUpdate {
                    device_id: self.cfg.device_id,
                    role: None,
                    election_id: Some(v.primary_election),
                    status: Some(status),
                };
                let _ = tx.try_send(Ok(proto::StreamMessageResponse { update: Some(Out::Arbitration(m)) }));
            }
        }
    }
}

/// Sends punted frames to the primary as packet-ins.
async fn forward_punts(shared: Arc<Shared>, mut punts: mpsc::Receiver<PuntedFrame>) {
    while let Some(p) = punts.recv().await {
        let msg = proto::StreamMessageResponse {
            update: Some(Out::Packet(proto::PacketIn {
                payload: p.frame,
                metadata: vec![
                    proto::PacketMetadata {
                        metadata_id: p4info::META_INGRESS_PORT,
                        value: crate::entry::encode(u128::from(p.in_port), 16),
                    },
                    proto::PacketMetadata { metadata_id: p4info::META_PUNT_REASON, value: crate::entry::encode(u128::from(p.reason), 16) },
                ],
            })),
        };
        let tx = {
            let st = shared.state();
            st.arbiter.primary().and_then(|(s, _)| st.streams.get(&s).cloned())
        };
        let sent = match tx {
            Some(tx) => tx.try_send(Ok(msg)).is_ok(),
            None => false,
        };
        let c = if sent { &shared.stats.packet_ins } else { &shared.stats.packet_in_dropped };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Bytes of the encoded `google.rpc.Status` (message and details) a failed Write's
/// `grpc-status-details-bin` trailer carries at most. It goes on the wire in base64 (4/3 of
/// it) next to `grpc-message`, and the whole header list must fit the 8 KiB of metadata that
/// Python's gRPC accepts (`grpc.max_metadata_size`; p4runtime-shell, finsy): a larger trailer
/// reaches such a client as a protocol error, not as the Write's errors.
pub const STATUS_DETAILS_MAX: usize = 4096;

/// Bytes of a failed Write's status message at most (it travels twice: `grpc-message` and in
/// the details).
pub const STATUS_MESSAGE_MAX: usize = 1024;

/// `s` cut to at most `max` bytes, at a character boundary, marked with `…` when cut.
fn capped(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The status of a failed Write: code UNKNOWN, a message naming the first refused update, and
/// in `grpc-status-details-bin` one `p4.v1.Error` per update, in order (`OK` for those that
/// would have applied), as P4Runtime asks — within [`STATUS_DETAILS_MAX`]: the `ABORTED`
/// updates (not applied because another failed) carry their code only; if that is still too
/// large, only the first refused update keeps its message; if even the codes alone do not fit
/// (a write of more than ~100 updates), the details are left out and the message says so.
fn write_status(outcomes: &[ops::Outcome]) -> Status {
    let refused = |o: &ops::Outcome| o.as_ref().is_some_and(|r| r.code != Code::Aborted);
    let first = outcomes.iter().position(refused).or_else(|| outcomes.iter().position(Option::is_some));
    let n = outcomes.iter().filter(|o| refused(o)).count();
    let aborted = outcomes.iter().filter(|o| o.as_ref().is_some_and(|r| r.code == Code::Aborted)).count();
    let first_text = first.and_then(|k| outcomes[k].as_ref().map(|r| format!("update {k}: {}", r.msg))).unwrap_or_default();
    let mut message = if n > 1 { format!("{n} of {} updates failed; first: {first_text}", outcomes.len()) } else { first_text };
    if aborted > 0 {
        message.push_str(&format!(" ({aborted} not applied: the write is atomic)"));
    }
    let message = capped(&message, STATUS_MESSAGE_MAX);
    for all_messages in [true, false] {
        let details: Vec<proto::Any> = outcomes
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let e = match o {
                    None => proto::Error { canonical_code: Code::Ok as i32, ..Default::default() },
                    Some(r) => {
                        let keep = r.code != Code::Aborted && (all_messages || Some(k) == first);
                        let msg = if keep { capped(&r.msg, STATUS_MESSAGE_MAX) } else { String::new() };
                        proto::Error { canonical_code: r.code as i32, message: msg, ..Default::default() }
                    }
                };
                proto::to_any("p4.v1.Error", &e)
            })
            .collect();
        let st = proto::RpcStatus { code: Code::Unknown as i32, message: message.clone(), details };
        let bytes = st.encode_to_vec();
        if bytes.len() <= STATUS_DETAILS_MAX {
            return Status::with_details(Code::Unknown, message, bytes.into());
        }
    }
    Status::new(
        Code::Unknown,
        capped(
            &format!(
                "{message} [the {} per-update errors are left out: more than a {STATUS_DETAILS_MAX}-byte status trailer]",
                outcomes.len()
            ),
            STATUS_MESSAGE_MAX + 100,
        ),
    )
}

/// The P4Runtime service.
struct Service {
    shared: Arc<Shared>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(&self, request: Request<proto::WriteRequest>) -> Result<Response<proto::WriteResponse>, Status> {
        let received = Instant::now();
        let req = request.into_inner();
        let s = &self.shared;
        s.check_device(req.device_id)?;
        s.check_role(&req.role, req.role_id)?;
        s.check_primary(req.election_id)?;
        if req.updates.is_empty() {
            return Ok(Response::new(proto::WriteResponse {}));
        }
        let (result, locked, stamps, log) = s
            .on_control(move |c, cache| {
                let locked = Instant::now();
                let _ = c.take_apply_stamps();
                let r = ops::write(c, cache, &req);
                let stamps = c.take_apply_stamps();
                // Freeing the decoded request (some thousand allocations) waits for no answer.
                c.retire(Box::new(req));
                (r, locked, stamps, c.write_log())
            })
            .await?;
        // Where an applied write's time went (`fastpath ctl show writes`).
        if let Some(st) = stamps {
            log.push(received, locked, &st, Instant::now());
        }
        match result {
            Ok(_) => Ok(Response::new(proto::WriteResponse {})),
            Err(outcomes) => Err(write_status(&outcomes)),
        }
    }

    type ReadStream = BoxStream<proto::ReadResponse>;

    async fn read(&self, request: Request<proto::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let req = request.into_inner();
        self.shared.check_device(req.device_id)?;
        self.shared.check_role(&req.role, 0)?;
        let entities = self.shared.on_control(move |c, _| ops::read(c, &req)).await?.map_err(|r| Status::new(r.code, r.msg))?;
        let mut chunks: Vec<Result<proto::ReadResponse, Status>> =
            entities.chunks(READ_CHUNK).map(|c| Ok(proto::ReadResponse { entities: c.to_vec() })).collect();
        if chunks.is_empty() {
            chunks.push(Ok(proto::ReadResponse { entities: Vec::new() }));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<proto::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<proto::SetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        let s = &self.shared;
        s.check_device(req.device_id)?;
        s.check_role(&req.role, req.role_id)?;
        use proto::set_action as a;
        let verify_only = req.action == a::VERIFY;
        if !verify_only {
            s.check_primary(req.election_id)?;
        }
        let verified = |cfg: Option<proto::ForwardingPipelineConfig>| {
            let cfg = cfg.ok_or_else(|| Status::invalid_argument("action needs a config"))?;
            Ok::<_, Status>((check_config(&s.loaded(), &cfg)?, cfg.cookie.map(|c| c.cookie)))
        };
        match req.action {
            a::VERIFY => verified(req.config).map(|_| ()),
            a::VERIFY_AND_SAVE => {
                let v = verified(req.config)?;
                s.loaded().saved = Some(v);
                Ok(())
            }
            a::VERIFY_AND_COMMIT => {
                let (v, cookie) = verified(req.config)?;
                s.commit(v, cookie).await
            }
            a::COMMIT => {
                let saved = s.loaded().saved.take();
                let (v, cookie) = saved.ok_or_else(|| Status::failed_precondition("COMMIT: no config was saved (VERIFY_AND_SAVE first)"))?;
                s.commit(v, cookie).await
            }
            // Reconciling keeps the forwarding state: only possible for the running pipeline.
            a::RECONCILE_AND_COMMIT => match verified(req.config)? {
                (Verified::New(name, ..), _) => Err(Status::unimplemented(format!(
                    "RECONCILE_AND_COMMIT of a different pipeline (\"{name}\"): its tables cannot be carried over from \"{}\"; use VERIFY_AND_COMMIT, which starts it with empty tables",
                    s.loaded().name
                ))),
                (v, cookie) => s.commit(v, cookie).await,
            },
            other => Err(Status::invalid_argument(format!(
                "action {other} (expected VERIFY 1, VERIFY_AND_SAVE 2, VERIFY_AND_COMMIT 3, COMMIT 4 or RECONCILE_AND_COMMIT 5)"
            ))),
        }
        .map(|()| Response::new(proto::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<proto::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<proto::GetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        let s = &self.shared;
        s.check_device(req.device_id)?;
        use proto::response_type as r;
        let l = s.loaded();
        let cookie = l.cookie.map(|c| proto::Cookie { cookie: c });
        let (info, dev) = match req.response_type {
            r::ALL => (true, true),
            r::COOKIE_ONLY => (false, false),
            r::P4INFO_AND_COOKIE => (true, false),
            r::DEVICE_CONFIG_AND_COOKIE => (false, true),
            other => return Err(Status::invalid_argument(format!("response type {other} (expected 0..=3)"))),
        };
        let config = proto::ForwardingPipelineConfig {
            p4info: info.then(|| l.p4info.clone()),
            p4_device_config: if dev { l.spec_text.as_bytes().to_vec() } else { Vec::new() },
            cookie,
        };
        drop(l);
        Ok(Response::new(proto::GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = BoxStream<proto::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<Streaming<proto::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(packet::IN_QUEUE);
        let shared = self.shared.clone();
        let id = {
            let mut st = shared.state();
            st.next += 1;
            let id = st.next;
            st.streams.insert(id, tx.clone());
            id
        };
        tokio::spawn(async move {
            while let Some(msg) = inbound.next().await {
                let Ok(msg) = msg else { break };
                if let Err(status) = on_stream_message(&shared, id, &tx, msg) {
                    let _ = tx.send(Err(status)).await;
                    break;
                }
            }
            let mut st = shared.state();
            st.streams.remove(&id);
            let v = st.arbiter.leave(id);
            shared.tell(&st, &v);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(&self, _request: Request<proto::CapabilitiesRequest>) -> Result<Response<proto::CapabilitiesResponse>, Status> {
        Ok(Response::new(proto::CapabilitiesResponse { p4runtime_api_version: P4RUNTIME_VERSION.into() }))
    }
}

/// Verifies a pipeline config: the running spec (by its text or its P4Info), or a new spec
/// that compiles, whose P4Info (when the client sends one) is the one generated from it.
fn check_config(l: &Loaded, cfg: &proto::ForwardingPipelineConfig) -> Result<Verified, Status> {
    if !cfg.p4_device_config.is_empty() {
        if cfg.p4_device_config == l.spec_text.as_bytes() {
            return Ok(Verified::Same);
        }
        let text = std::str::from_utf8(&cfg.p4_device_config)
            .map_err(|_| Status::invalid_argument("p4_device_config: not UTF-8 text (it is a fastpath spec file)"))?;
        let prog = fastpath_pipeline::compile("p4_device_config", text)
            .map_err(|e| Status::invalid_argument(format!("p4_device_config does not compile:\n{e}")))?;
        let info = p4info::p4info(&prog, "");
        if cfg.p4info.as_ref().is_some_and(|i| *i != info) {
            return Err(Status::invalid_argument(format!(
                "the P4Info does not match pipeline \"{}\" of the p4_device_config: send the P4Info fastpath generates for this spec (`fastpath p4info SPEC`), or none",
                prog.name
            )));
        }
        return Ok(Verified::New(prog.name.clone(), text.to_string(), Box::new(info)));
    }
    match &cfg.p4info {
        Some(i) if *i == l.p4info => Ok(Verified::Same),
        Some(_) => Err(Status::invalid_argument(
            "the P4Info differs from the running pipeline's and there is no p4_device_config: a new pipeline needs its fastpath spec text as the device config",
        )),
        None => Err(Status::invalid_argument("the config has neither a p4_device_config nor a P4Info")),
    }
}

/// Handles one stream message.
///
/// # Errors
/// A status that ends the stream (wrong device, clashing election id, a role).
fn on_stream_message(s: &Shared, id: StreamId, tx: &StreamTx, msg: proto::StreamMessageRequest) -> Result<(), Status> {
    match msg.update {
        Some(In::Arbitration(a)) => {
            s.check_device(a.device_id)?;
            if let Some(r) = &a.role {
                s.check_role(&r.name, r.id)?;
            }
            let e = a.election_id.unwrap_or_default();
            let mut st = s.state();
            match st.arbiter.arbitrate(id, e) {
                Ok(v) => s.tell(&st, &v),
                Err(Clash::InUse(_)) => {
                    return Err(Status::invalid_argument(format!(
                        "election id (high {}, low {}) is held by another controller",
                        e.high, e.low
                    )));
                }
            }
            Ok(())
        }
        Some(In::Packet(p)) => {
            let err = |code: Code, msg: String| {
                let e = proto::StreamError {
                    canonical_code: code as i32,
                    message: msg,
                    space: String::new(),
                    code: 0,
                    details: Some(proto::stream_error::Details::PacketOut(proto::PacketOutError { packet_out: Some(p.clone()) })),
                };
                let _ = tx.try_send(Ok(proto::StreamMessageResponse { update: Some(Out::Error(e)) }));
            };
            let primary = s.state().arbiter.primary().map(|x| x.0);
            if primary != Some(id) {
                err(Code::PermissionDenied, "packet-out from a controller that is not the primary".into());
                return Ok(());
            }
            match packet_out_port(s, &p) {
                Err(m) => err(Code::InvalidArgument, m),
                Ok((port, to_pipeline)) => match s.out.queue(port, to_pipeline, p.payload.clone()) {
                    Ok(()) => {}
                    Err(true) => err(Code::ResourceExhausted, "the packet-out queue is full".into()),
                    Err(false) => err(Code::Unavailable, "the workers have stopped".into()),
                },
            }
            Ok(())
        }
        Some(In::DigestAck(_)) | Some(In::Other(_)) | None => Ok(()),
    }
}

/// The port of a packet-out, and whether it enters the pipeline (`submit_to_ingress`).
fn packet_out_port(s: &Shared, p: &proto::PacketOut) -> Result<(u16, bool), String> {
    if p.payload.is_empty() {
        return Err("packet-out with an empty payload".into());
    }
    let (mut port, mut to_pipeline) = (None, false);
    for m in &p.metadata {
        match m.metadata_id {
            p4info::META_EGRESS_PORT => {
                port = Some(crate::entry::decode(&m.value, 16, "packet_out egress_port").map_err(|r| r.msg)? as u16);
            }
            p4info::META_SUBMIT_TO_INGRESS => {
                to_pipeline = crate::entry::decode(&m.value, 1, "packet_out submit_to_ingress").map_err(|r| r.msg)? == 1;
            }
            id => {
                return Err(format!(
                    "packet-out metadata id {id} unknown (egress_port is {}, submit_to_ingress {})",
                    p4info::META_EGRESS_PORT,
                    p4info::META_SUBMIT_TO_INGRESS
                ))
            }
        }
    }
    let port = port.ok_or("packet-out without egress_port metadata (id 1)")?;
    if usize::from(port) >= s.cfg.ports {
        return Err(format!("packet-out to port {port}: there are {} ports (0..{})", s.cfg.ports, s.cfg.ports));
    }
    Ok((port, to_pipeline))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of metadata a failed Write's status puts on the wire: `grpc-message`
    /// (percent-encoded; ASCII here) and `grpc-status-details-bin` in base64.
    fn trailer_bytes(st: &Status) -> usize {
        st.message().len() + st.details().len().div_ceil(3) * 4
    }

    fn refused(code: Code, msg: &str) -> ops::Outcome {
        Some(crate::entry::Refused { code, msg: msg.into() })
    }

    #[test]
    fn a_failed_write_status_names_the_refused_update_and_fits_8_kib_of_metadata() {
        use prost::Message as _;
        let decode = |st: &Status| proto::RpcStatus::decode(st.details()).unwrap();
        let errors = |st: &Status| -> Vec<(i32, String)> {
            decode(st)
                .details
                .iter()
                .map(|a| proto::Error::decode(a.value.as_slice()).unwrap())
                .map(|e| (e.canonical_code, e.message))
                .collect()
        };
        let aborted = || refused(Code::Aborted, "not applied: another update of this atomic write failed");
        // Small: every update's error, the refused one with its message, the aborted ones with
        // their code only.
        let small = write_status(&[aborted(), refused(Code::NotFound, "table \"fib4\": no entry with this match"), aborted()]);
        assert_eq!(small.code(), Code::Unknown);
        assert!(small.message().starts_with("update 1: table \"fib4\": no entry"), "{}", small.message());
        assert!(small.message().contains("2 not applied"), "{}", small.message());
        let e = errors(&small);
        assert_eq!(e.len(), 3);
        assert_eq!(e[1], (Code::NotFound as i32, "table \"fib4\": no entry with this match".into()));
        assert_eq!(e[0], (Code::Aborted as i32, String::new()));
        // CONTINUE_ON_ERROR: the applied ones are OK, each refused one keeps its message.
        let mixed = write_status(&[None, refused(Code::AlreadyExists, "a"), None, refused(Code::NotFound, "b")]);
        assert!(mixed.message().starts_with("2 of 4 updates failed; first: update 1: a"), "{}", mixed.message());
        assert_eq!(errors(&mixed), [(0, String::new()), (6, "a".into()), (0, String::new()), (5, "b".into())]);
        // The lab's writes: 201 updates, one refused, the rest aborted: too many for every
        // code, so the message says so and names the refused update.
        for n in [60usize, 201, 1000, 5000] {
            let mut o: Vec<ops::Outcome> = (0..n).map(|_| aborted()).collect();
            o[n - 1] = refused(Code::AlreadyExists, "table \"fib4\": an entry with this match exists (MODIFY it)");
            let st = write_status(&o);
            assert!(trailer_bytes(&st) < 7 * 1024, "{n} updates: {} bytes", trailer_bytes(&st));
            assert!(st.message().contains(&format!("update {}: table \"fib4\": an entry", n - 1)), "{n}: {}", st.message());
            if st.details().is_empty() {
                assert!(st.message().contains("per-update errors are left out"), "{}", st.message());
            } else {
                let e = errors(&st);
                assert_eq!(e.len(), n);
                assert_eq!(e[n - 1].0, Code::AlreadyExists as i32);
            }
        }
        assert!(!write_status(&(0..60).map(|_| aborted()).chain([refused(Code::NotFound, "x")]).collect::<Vec<_>>()).details().is_empty());
        // Many refused updates with long messages: the first keeps its message.
        let long = "x".repeat(300);
        let st = write_status(&(0..40).map(|_| refused(Code::InvalidArgument, &long)).collect::<Vec<_>>());
        assert!(trailer_bytes(&st) < 7 * 1024);
        let e = errors(&st);
        assert_eq!(e.len(), 40);
        assert_eq!(e[0].1.len(), 300);
        assert!(e[1..].iter().all(|x| x.1.is_empty() && x.0 == Code::InvalidArgument as i32));
        // A huge message is cut, at a character boundary.
        let st = write_status(&[refused(Code::InvalidArgument, &"é".repeat(5000))]);
        assert!(st.message().len() <= STATUS_MESSAGE_MAX && st.message().ends_with('…'), "{}", st.message().len());
    }

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(Listen::parse("unix:/run/p.sock").unwrap(), Listen::Unix("/run/p.sock".into()));
        assert_eq!(Listen::parse("/tmp/x/p.sock").unwrap(), Listen::Unix("/tmp/x/p.sock".into()));
        assert_eq!(Listen::parse("127.0.0.1:9559").unwrap(), Listen::Tcp("127.0.0.1:9559".parse().unwrap()));
        assert!(Listen::parse("localhost").unwrap_err().contains("expected a unix socket"));
        assert!(Listen::parse("unix:").unwrap_err().contains("needs a path"));
        assert_eq!(Listen::parse("[::1]:9559").unwrap().client_addr(), "[::1]:9559");
    }

    #[test]
    fn plaintext_tcp_beyond_loopback_is_flagged() {
        let tcp = |a: &str| Listen::Tcp(a.parse().unwrap());
        assert!(exposure(&tcp("0.0.0.0:9559"), false).unwrap().contains("without TLS"));
        assert_eq!(exposure(&tcp("0.0.0.0:9559"), true), None);
        assert_eq!(exposure(&tcp("127.0.0.1:9559"), false), None);
        let local = Server::bind(&tcp("127.0.0.1:0"), &Access::default(), None).unwrap();
        assert_eq!(local.exposure(), None);
        let e = Server::bind(&Listen::Unix("/tmp/x.sock".into()), &Access::default(), Some(("c".into(), "k".into())));
        assert!(e.err().unwrap().contains("--p4rt-cert"), "TLS on a unix socket is refused");
    }
}
