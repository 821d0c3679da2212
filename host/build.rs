//! Generates the `io.cloudevents.v1` server (and client, for benchmarks) from `proto/`.
use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("PROTOC", protoc) };
    let out = PathBuf::from(env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=../proto/cloudevent.proto");
    tonic_prost_build::configure()
        .bytes(".io.cloudevents.v1.CloudEvent.binary_data")
        .file_descriptor_set_path(out.join("cloudevent_descriptor.bin"))
        .compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    Ok(())
}
