//! Generates the `io.cloudevents.v1` messages and server from `proto/`.
//!
//! Two passes over the same proto: the messages (with `binary_data` as `Bytes`), and the server,
//! whose `CloudEvent` is `crate::wire::WireEvent` — an event either as a message or already
//! encoded, so that fan-out encodes an event once for all its subscribers — with
//! `grpc::codec::LeanCodec`, whose buffers start small.
use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("PROTOC", protoc) };
    let out = PathBuf::from(env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=../proto/cloudevent.proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .bytes(".io.cloudevents.v1.CloudEvent.binary_data")
        .file_descriptor_set_path(out.join("cloudevent_descriptor.bin"))
        .compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    let server_out = out.join("server");
    std::fs::create_dir_all(&server_out)?;
    tonic_prost_build::configure()
        .build_client(false)
        .out_dir(&server_out)
        .codec_path("crate::grpc::codec::LeanCodec")
        .extern_path(".io.cloudevents.v1.CloudEvent", "crate::wire::WireEvent")
        .compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    Ok(())
}
