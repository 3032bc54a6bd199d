//! The server's RPCs end to end over TCP on loopback, through the generated tonic client, with a
//! worker thread applying changes and punting: arbitration (primary, backup, a clashing election
//! id, hand-over when the primary leaves), the device id, the pipeline config (get; set the same
//! spec, a broken one, a new one saved then committed onto the worker), meters written and read back, counters read, a packet-in
//! reaching the primary only, and a packet-out from a backup refused on the stream.

use fastpath_control::{mailbox, Access, Control};
use fastpath_io::worker::Punted;
use fastpath_p4rt::server::generated::p4_runtime_client::P4RuntimeClient;
use fastpath_p4rt::{p4info, proto, Config, Listen, PacketIo, Server};
use fastpath_packet::{PktId, PuntReason};
use proto::stream_message_request::Update as In;
use proto::stream_message_response::Update as Out;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Code;

const SPEC: &str = r#"
name = "metered"
[parser]
headers = ["eth"]
[[meter]]
name = "pol"
kind = "trtcm"
size = 4
[[counter]]
name = "hits"
size = 2
[[action]]
name = "fwd_count"
params = ["port"]
body = '''
count hits 1
forward port
'''
[[table]]
name = "port_map"
key = [{ field = "meta.in_port", match = "exact" }]
actions = ["fwd_count", "to_control"]
size = 16
default = "to_control"
[control]
ingress = "apply port_map"
"#;

fn pipe() -> fastpath_pipeline::Pipeline {
    fastpath_pipeline::compile("metered.toml", SPEC).unwrap().instantiate()
}

type Stream = (tokio::sync::mpsc::Sender<proto::StreamMessageRequest>, tonic::Streaming<proto::StreamMessageResponse>);

async fn open(client: &mut P4RuntimeClient<Channel>, device: u64, low: u64) -> Stream {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let arb =
        proto::MasterArbitrationUpdate { device_id: device, role: None, election_id: Some(proto::Uint128 { high: 0, low }), status: None };
    tx.send(proto::StreamMessageRequest { update: Some(In::Arbitration(arb)) }).await.unwrap();
    let s = client.stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    (tx, s)
}

/// The next message on a stream (within 5 s).
async fn next(s: &mut tonic::Streaming<proto::StreamMessageResponse>) -> Result<Option<Out>, tonic::Status> {
    match tokio::time::timeout(Duration::from_secs(5), s.message()).await {
        Ok(r) => r.map(|m| m.and_then(|m| m.update)),
        Err(_) => panic!("no stream message within 5 s"),
    }
}

/// (status code, primary's election low) of an arbitration update.
fn arb(o: Option<Out>) -> (i32, u64) {
    match o {
        Some(Out::Arbitration(a)) => (a.status.unwrap().code, a.election_id.unwrap().low),
        other => panic!("expected an arbitration update, got {other:?}"),
    }
}

fn election(low: u64) -> Option<proto::Uint128> {
    Some(proto::Uint128 { high: 0, low })
}

#[test]
fn arbitration_config_meters_counters_and_packet_io_over_grpc() {
    let (end, mut worker_end) = mailbox();
    let stop = AtomicBool::new(false);
    let server = Server::bind(&Listen::Tcp("127.0.0.1:0".parse().unwrap()), &Access::default(), None).unwrap();
    let addr = server.client_addr();
    let io = PacketIo::new();
    let mut exception = io.exception(0);
    let control = Mutex::new(Control::new(pipe(), Box::new(|| Ok(pipe())), vec![end]));
    let cfg = Config { device_id: 7, spec_text: SPEC.to_string(), ports: 2 };
    std::thread::scope(|s| {
        let stop = &stop;
        let worker = s.spawn(move || {
            let mut p = pipe();
            while !stop.load(Ordering::Relaxed) {
                worker_end.poll(&mut p, |_| {});
                std::thread::sleep(Duration::from_micros(200));
            }
            p.program().tables[0].size
        });
        let (io, control) = (&io, &control);
        let srv = s.spawn(move || server.serve_until(cfg, io, control, stop));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
            let mut c = P4RuntimeClient::new(channel);

            // Arbitration: 5 is primary; 3 a backup; a second 5 is refused; the wrong device too.
            let (tx5, mut s5) = open(&mut c, 7, 5).await;
            assert_eq!(arb(next(&mut s5).await.unwrap()), (Code::Ok as i32, 5));
            let (tx3, mut s3) = open(&mut c, 7, 3).await;
            assert_eq!(arb(next(&mut s3).await.unwrap()), (Code::AlreadyExists as i32, 5));
            let (_txc, mut clash) = open(&mut c, 7, 5).await;
            assert_eq!(next(&mut clash).await.unwrap_err().code(), Code::InvalidArgument);
            let (_txd, mut wrong) = open(&mut c, 8, 9).await;
            let e = next(&mut wrong).await.unwrap_err();
            assert_eq!(e.code(), Code::NotFound);
            assert!(e.message().contains("this is device 7"), "{e}");

            // The pipeline config: the spec text and the P4Info.
            let got = c
                .get_forwarding_pipeline_config(proto::GetForwardingPipelineConfigRequest { device_id: 7, response_type: 0 })
                .await
                .unwrap()
                .into_inner();
            let config = got.config.unwrap();
            assert_eq!(config.p4_device_config, SPEC.as_bytes());
            let info = config.p4info.unwrap();
            assert_eq!(info.meters[0].preamble.as_ref().unwrap().id, 0x1400_0001);
            let set = |dev: &str, e: u64| proto::SetForwardingPipelineConfigRequest {
                device_id: 7,
                election_id: election(e),
                action: proto::set_action::VERIFY_AND_COMMIT,
                config: Some(proto::ForwardingPipelineConfig {
                    p4info: None,
                    p4_device_config: dev.as_bytes().to_vec(),
                    cookie: Some(proto::Cookie { cookie: 42 }),
                }),
                ..Default::default()
            };
            c.set_forwarding_pipeline_config(set(SPEC, 5)).await.unwrap();
            assert_eq!(c.set_forwarding_pipeline_config(set(SPEC, 3)).await.unwrap_err().code(), Code::PermissionDenied);
            // A new spec with the running pipeline's P4Info: the P4Info does not describe it.
            let other = SPEC.replace("size = 16", "size = 32");
            let mut wrong_info = set(&other, 5);
            wrong_info.action = proto::set_action::VERIFY;
            if let Some(cfg) = wrong_info.config.as_mut() {
                cfg.p4info = Some(info.clone());
            }
            let e = c.set_forwarding_pipeline_config(wrong_info).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert!(e.message().contains("does not match"), "{e}");
            let e = c.set_forwarding_pipeline_config(set("name = 1", 5)).await.unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            let cookie = c
                .get_forwarding_pipeline_config(proto::GetForwardingPipelineConfigRequest { device_id: 7, response_type: 1 })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(cookie.config.unwrap().cookie, Some(proto::Cookie { cookie: 42 }));

            // A meter written by the primary reads back; a backup may read but not write.
            let meter = |index: i64, cir: i64| proto::Update {
                r#type: proto::update_type::MODIFY,
                entity: Some(proto::Entity {
                    entity: Some(proto::entity::Entity::MeterEntry(proto::MeterEntry {
                        meter_id: p4info::id(p4info::METER, 0),
                        index: Some(proto::Index { index }),
                        config: Some(proto::MeterConfig { cir, cburst: 1500, pir: 2 * cir, pburst: 3000, eburst: 0 }),
                    })),
                }),
            };
            let w = |e: u64, updates: Vec<proto::Update>| proto::WriteRequest {
                device_id: 7,
                election_id: election(e),
                updates,
                ..Default::default()
            };
            assert_eq!(c.write(w(3, vec![meter(1, 1000)])).await.unwrap_err().code(), Code::PermissionDenied);
            c.write(w(5, vec![meter(1, 125_000)])).await.unwrap();
            // Out of range: the p4.v1.Error names the meter and the index.
            let e = c.write(w(5, vec![meter(2, 1000), meter(9, 1000)])).await.unwrap_err();
            let st = <proto::RpcStatus as prost::Message>::decode(e.details()).unwrap();
            let errs: Vec<proto::Error> =
                st.details.iter().map(|a| <proto::Error as prost::Message>::decode(&a.value[..]).unwrap()).collect();
            assert_eq!((errs[0].canonical_code, errs[1].canonical_code), (Code::Ok as i32, Code::OutOfRange as i32));
            assert!(errs[1].message.contains("\"pol\": index 9 out of range 0..4"), "{errs:?}");
            let read = |e: proto::entity::Entity| proto::ReadRequest {
                device_id: 7,
                role: String::new(),
                entities: vec![proto::Entity { entity: Some(e) }],
            };
            let all_meters = proto::entity::Entity::MeterEntry(proto::MeterEntry { meter_id: 0, index: None, config: None });
            let mut r = c.read(read(all_meters)).await.unwrap().into_inner();
            let got = r.message().await.unwrap().unwrap().entities;
            let configs: Vec<Option<proto::MeterConfig>> = got
                .iter()
                .map(|e| match &e.entity {
                    Some(proto::entity::Entity::MeterEntry(m)) => m.config,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(configs.len(), 4);
            assert_eq!(configs[1], Some(proto::MeterConfig { cir: 125_000, cburst: 1500, pir: 250_000, pburst: 3000, eburst: 0 }));
            assert_eq!(configs[0], None, "unconfigured");
            assert!(configs[2].is_some(), "the good update of the failed write was applied (CONTINUE_ON_ERROR)");

            // Counters read (zero: nothing forwarded here), every index.
            let counters = proto::entity::Entity::CounterEntry(proto::CounterEntry {
                counter_id: p4info::id(p4info::COUNTER, 0),
                index: None,
                data: None,
            });
            let got = c.read(read(counters)).await.unwrap().into_inner().message().await.unwrap().unwrap().entities;
            assert_eq!(got.len(), 2);
            // Entity kinds fastpath does not have are refused by name.
            let reg = proto::entity::Entity::RegisterEntry(proto::Opaque {});
            let e = c.read(read(reg)).await.unwrap_err();
            assert_eq!(e.code(), Code::Unimplemented);
            assert!(e.message().contains("register"), "{e}");

            // A punt reaches the primary only, with its port and reason.
            exception.punt(&[0xab; 60], &Punted { pkt: PktId(0), reason: PuntReason::ACTION, in_port: 1 });
            match next(&mut s5).await.unwrap() {
                Some(Out::Packet(p)) => {
                    assert_eq!(p.payload, [0xab; 60]);
                    let md: Vec<(u32, Vec<u8>)> = p.metadata.iter().map(|m| (m.metadata_id, m.value.clone())).collect();
                    assert_eq!(md, [(1, vec![1]), (2, vec![0])]);
                }
                other => panic!("{other:?}"),
            }
            // A packet-out from the backup is refused on its stream; the primary's goes out.
            let pout = |port: u8| proto::StreamMessageRequest {
                update: Some(In::Packet(proto::PacketOut {
                    payload: vec![1; 60],
                    metadata: vec![proto::PacketMetadata { metadata_id: 1, value: vec![port] }],
                })),
            };
            tx3.send(pout(1)).await.unwrap();
            match next(&mut s3).await.unwrap() {
                Some(Out::Error(e)) => assert_eq!(e.canonical_code, Code::PermissionDenied as i32),
                other => panic!("{other:?}"),
            }
            tx5.send(pout(5)).await.unwrap();
            match next(&mut s5).await.unwrap() {
                Some(Out::Error(e)) => assert!(e.message.contains("there are 2 ports"), "{e:?}"),
                other => panic!("{other:?}"),
            }
            tx5.send(pout(1)).await.unwrap();
            let mut sent = Vec::new();
            for _ in 0..100 {
                exception.packet_out(&mut |port, f| {
                    sent.push((port, f.len()));
                    true
                });
                if !sent.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(sent, [(1, 60)]);
            // With submit_to_ingress it enters the pipeline as arriving on the port it names,
            // and leaves through no port.
            tx5.send(proto::StreamMessageRequest {
                update: Some(In::Packet(proto::PacketOut {
                    payload: vec![2; 64],
                    metadata: vec![
                        proto::PacketMetadata { metadata_id: 1, value: vec![0] },
                        proto::PacketMetadata { metadata_id: 2, value: vec![1] },
                    ],
                })),
            })
            .await
            .unwrap();
            let mut injected = Vec::new();
            for _ in 0..100 {
                exception.packet_out(&mut |port, f| {
                    sent.push((port, f.len()));
                    true
                });
                exception.packet_in_pipeline(&mut |port, f| {
                    injected.push((port, f.len()));
                    true
                });
                if !injected.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!((injected, sent.len()), (vec![(0, 64)], 1));

            // The primary leaves: the backup is told it is primary now.
            drop(tx5);
            drop(s5);
            assert_eq!(arb(next(&mut s3).await.unwrap()), (Code::Ok as i32, 3));
            c.write(w(3, vec![meter(0, 1000)])).await.unwrap();

            // A new spec, saved then committed, replaces the pipeline on the worker; the config
            // reads back as the new spec with its P4Info.
            let mut save = set(&other, 3);
            save.action = proto::set_action::VERIFY_AND_SAVE;
            c.set_forwarding_pipeline_config(save).await.unwrap();
            let get = |t: i32| proto::GetForwardingPipelineConfigRequest { device_id: 7, response_type: t };
            let cfg = c.get_forwarding_pipeline_config(get(0)).await.unwrap().into_inner().config.unwrap();
            assert_eq!(cfg.p4_device_config, SPEC.as_bytes(), "saved, not yet committed");
            let commit = |e: u64, action: i32| proto::SetForwardingPipelineConfigRequest {
                device_id: 7,
                election_id: election(e),
                action,
                ..Default::default()
            };
            c.set_forwarding_pipeline_config(commit(3, proto::set_action::COMMIT)).await.unwrap();
            let cfg = c.get_forwarding_pipeline_config(get(0)).await.unwrap().into_inner().config.unwrap();
            assert_eq!(cfg.p4_device_config, other.as_bytes());
            assert_eq!(cfg.p4info.unwrap().tables[0].size, 32);
            assert_eq!(cfg.cookie, Some(proto::Cookie { cookie: 42 }));
            let e = c.set_forwarding_pipeline_config(commit(3, proto::set_action::COMMIT)).await.unwrap_err();
            assert_eq!(e.code(), Code::FailedPrecondition, "nothing saved any more: {e}");
            // Reconciling cannot carry tables across pipelines.
            let mut back = set(SPEC, 3);
            back.action = proto::set_action::RECONCILE_AND_COMMIT;
            let e = c.set_forwarding_pipeline_config(back).await.unwrap_err();
            assert_eq!(e.code(), Code::Unimplemented, "{e}");
            assert!(e.message().contains("VERIFY_AND_COMMIT"), "{e}");
        });
        stop.store(true, Ordering::Relaxed);
        srv.join().unwrap().unwrap();
        assert_eq!(worker.join().unwrap(), 32, "the worker runs the committed spec");
    });
}
