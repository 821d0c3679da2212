//! Generates the `io.cloudevents.v1` client the black-box tests drive conductor with, and the
//! minimal server the benchmarks use as their raw tonic baseline.
use std::env;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=../proto/cloudevent.proto");
    tonic_prost_build::configure().compile_protos(&["../proto/cloudevent.proto"], &["../proto"])?;
    Ok(())
}
