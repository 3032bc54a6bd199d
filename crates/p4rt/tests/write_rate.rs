//! P4Runtime `Write` end to end over TCP on loopback, through the generated tonic client: a
//! controller arbitrates, then writes route INSERTs in batches to the router pipeline while a
//! worker thread forwards batches of frames and applies the changes between them. Asserts that
//! every route reached the worker's replica and that the worker forwarded traffic throughout;
//! prints the update rate (the target: ≥ 50k table-entry updates per second, batched,
//! while forwarding). Timing is printed, never asserted.
//!
//! `cargo test --release -p fastpath-p4rt --test write_rate -- --nocapture`
//! (`P4RT_UPDATES` updates in batches of `P4RT_BATCH`; defaults 50,000 and 1,000.)

use fastpath_control::{mailbox, Access, Control};
use fastpath_p4rt::server::generated::p4_runtime_client::P4RuntimeClient;
use fastpath_p4rt::{p4info, proto, Config, Listen, PacketIo, Server};
use fastpath_packet::{Batch, Pool, Verdict};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn router() -> fastpath_pipeline::Pipeline {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/router.toml")).unwrap();
    let mut p = fastpath_pipeline::compile("router.toml", &text).unwrap().instantiate();
    p.set_ports(2).unwrap();
    p.load_entries("base", "table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)").unwrap();
    p
}

/// INSERT of route `10.a.b.0/24 → nexthop(1, …)` for `k = a << 8 | b`.
fn route(prog: &fastpath_pipeline::Program, k: usize) -> proto::Update {
    let nexthop = prog.actions.iter().position(|a| a.name == "nexthop").unwrap();
    let te = proto::TableEntry {
        table_id: p4info::id(p4info::TABLE, 0),
        r#match: vec![proto::FieldMatch {
            field_id: 1,
            field_match_type: Some(proto::field_match::FieldMatchType::Lpm(proto::field_match::Lpm {
                value: vec![10, (k >> 8) as u8, k as u8, 0],
                prefix_len: 24,
            })),
        }],
        action: Some(proto::TableAction {
            r#type: Some(proto::table_action::Type::Action(proto::Action {
                action_id: p4info::id(p4info::ACTION, nexthop),
                params: vec![
                    proto::ActionParam { param_id: 1, value: vec![1] },
                    proto::ActionParam { param_id: 2, value: vec![2, 0, 0, 0, 1, 1] },
                    proto::ActionParam { param_id: 3, value: vec![2, 0, 0, 0, 0, 1] },
                ],
            })),
        }),
        ..Default::default()
    };
    proto::Update {
        r#type: proto::update_type::INSERT,
        entity: Some(proto::Entity { entity: Some(proto::entity::Entity::TableEntry(te)) }),
    }
}

#[test]
fn batched_writes_reach_a_forwarding_worker_and_the_rate_is_printed() {
    let (updates, batch) = (env("P4RT_UPDATES", 50_000).min(65_536), env("P4RT_BATCH", 1_000).max(1));
    let (end, mut worker_end) = mailbox();
    let stop = AtomicBool::new(false);
    let forwarded = AtomicU64::new(0);
    let server = Server::bind(&Listen::Tcp("127.0.0.1:0".parse().unwrap()), &Access::default(), None).unwrap();
    let addr = server.client_addr();
    let io = PacketIo::new();
    let control = Mutex::new(Control::new(router(), Box::new(|| Ok(router())), vec![end]));
    let cfg = Config { device_id: 1, spec_text: String::new(), ports: 2 };
    let worker_routes = std::thread::scope(|s| {
        let (stop, forwarded) = (&stop, &forwarded);
        // The worker: forwards a batch of 64 frames, then applies what its mailbox holds.
        let worker = s.spawn(move || {
            let mut p = router();
            let mut pool = Pool::new(256);
            let mut b = Batch::new();
            let frame = fastpath_packet::build::FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3])
                .ipv4(Ipv4Addr::new(198, 19, 0, 1), Ipv4Addr::new(198, 18, 0, 9))
                .udp(1, 2)
                .frame_len(64)
                .build();
            while !stop.load(Ordering::Relaxed) {
                b.clear();
                for _ in 0..64 {
                    let h = pool.alloc().unwrap();
                    pool.set_data(h, &frame);
                    b.push(h, 0);
                }
                p.process(&mut pool, &mut b, 0);
                let tx = b.verdicts().iter().filter(|v| **v == Verdict::Tx(1)).count();
                forwarded.fetch_add(tx as u64, Ordering::Relaxed);
                pool.free_bulk(b.handles());
                worker_end.poll(&mut p, |_| {});
            }
            p.table("fib4").unwrap().len()
        });
        let (io, control) = (&io, &control);
        let srv = s.spawn(move || server.serve_until(cfg, io, control, stop));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let prog = control.lock().unwrap().pipeline_info().clone();
        let result = rt.block_on(async {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
            let mut client = P4RuntimeClient::new(channel);
            // Arbitrate on a stream that stays open for the whole run.
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let arb = proto::MasterArbitrationUpdate {
                device_id: 1,
                role: None,
                election_id: Some(proto::Uint128 { high: 0, low: 1 }),
                status: None,
            };
            tx.send(proto::StreamMessageRequest { update: Some(proto::stream_message_request::Update::Arbitration(arb)) }).await.unwrap();
            let mut stream = client.stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
            let first = stream.message().await.unwrap().unwrap();
            let Some(proto::stream_message_response::Update::Arbitration(a)) = first.update else { panic!("{first:?}") };
            assert_eq!(a.status.unwrap().code, 0, "primary");
            // A write without the primary's election id is refused.
            let denied =
                client.write(proto::WriteRequest { device_id: 1, updates: vec![route(&prog, 0)], ..Default::default() }).await.unwrap_err();
            assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied}");
            let fwd0 = forwarded.load(Ordering::Relaxed);
            let t0 = Instant::now();
            let mut k = 0;
            while k < updates {
                let n = batch.min(updates - k);
                let req = proto::WriteRequest {
                    device_id: 1,
                    election_id: Some(proto::Uint128 { high: 0, low: 1 }),
                    updates: (k..k + n).map(|i| route(&prog, i)).collect(),
                    ..Default::default()
                };
                client.write(req).await.unwrap();
                k += n;
            }
            let secs = t0.elapsed().as_secs_f64();
            let fwd = forwarded.load(Ordering::Relaxed) - fwd0;
            // A duplicate INSERT names the update and the reason in a p4.v1.Error.
            let dup = client
                .write(proto::WriteRequest {
                    device_id: 1,
                    election_id: Some(proto::Uint128 { high: 0, low: 1 }),
                    updates: vec![route(&prog, 0)],
                    ..Default::default()
                })
                .await
                .unwrap_err();
            assert_eq!(dup.code(), tonic::Code::Unknown);
            let details = <proto::RpcStatus as prost::Message>::decode(dup.details()).unwrap();
            let e = <proto::Error as prost::Message>::decode(&details.details[0].value[..]).unwrap();
            assert_eq!(
                (details.details[0].type_url.as_str(), e.canonical_code),
                ("type.googleapis.com/p4.v1.Error", tonic::Code::AlreadyExists as i32)
            );
            assert!(e.message.contains("table \"fib4\""), "{}", e.message);
            drop(tx);
            (secs, fwd)
        });
        stop.store(true, Ordering::Relaxed);
        srv.join().unwrap().unwrap();
        let (secs, fwd) = result;
        println!(
            "p4rt write: {updates} route INSERTs in batches of {batch} in {secs:.3} s = {:.0} updates/s, while the worker forwarded {fwd} packets",
            updates as f64 / secs
        );
        assert!(fwd > 0, "the worker forwarded throughout");
        worker.join().unwrap()
    });
    assert_eq!(worker_routes, updates + 1, "every route reached the worker's replica");
    assert_eq!(control.lock().unwrap().tables()[0].entries, updates + 1);
}
