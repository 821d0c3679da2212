//! Generates the `io.cloudevents.v1` client (no server) that conductor-load and `conductor agent` speak.
use std::env;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=../proto/cloudevent.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    Ok(())
}
