//! Generates the `p4.v1.P4Runtime` gRPC service (server and client) with tonic-build's manual
//! builder: the messages are our own prost structs (`src/proto.rs`), so no `.proto` file and no
//! `protoc` are needed.

fn main() {
    let m = |name: &str, route: &str, input: &str, output: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("crate::proto::{input}"))
            .output_type(format!("crate::proto::{output}"))
            .codec_path("tonic_prost::ProstCodec")
    };
    let service = tonic_build::manual::Service::builder()
        .name("P4Runtime")
        .package("p4.v1")
        .method(m("write", "Write", "WriteRequest", "WriteResponse").build())
        .method(m("read", "Read", "ReadRequest", "ReadResponse").server_streaming().build())
        .method(
            m(
                "set_forwarding_pipeline_config",
                "SetForwardingPipelineConfig",
                "SetForwardingPipelineConfigRequest",
                "SetForwardingPipelineConfigResponse",
            )
            .build(),
        )
        .method(
            m(
                "get_forwarding_pipeline_config",
                "GetForwardingPipelineConfig",
                "GetForwardingPipelineConfigRequest",
                "GetForwardingPipelineConfigResponse",
            )
            .build(),
        )
        .method(
            m("stream_channel", "StreamChannel", "StreamMessageRequest", "StreamMessageResponse")
                .client_streaming()
                .server_streaming()
                .build(),
        )
        .method(m("capabilities", "Capabilities", "CapabilitiesRequest", "CapabilitiesResponse").build())
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
}
