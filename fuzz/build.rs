//! The `io.cloudevents.v1` messages, generated as the host generates them (no service).
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
        .out_dir(&out)
        .compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    Ok(())
}
