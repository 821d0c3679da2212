//! Generates the `io.cloudevents.v1` messages and server from `proto/`.
//!
//! Two passes over the same proto: the messages (with `binary_data` as `Bytes`), and the server,
//! whose `CloudEvent` is `crate::wire::WireEvent` — an event either as a message or already
//! encoded, so that fan-out encodes an event once for all its subscribers — with
//! `grpc::codec::LeanCodec`, whose buffers start small.
//!
//! Also names the commit the binary is built from (`CONDUCTOR_COMMIT`, for `conductor
//! --version` and `conductor_build_info`), and writes the Rust SDK's manifest as a crate of its
//! own (`plugin-sdk-Cargo.toml`), which `conductor plugins new` writes into a project.
use std::{env, path::PathBuf, process::Command};

#[path = "src/authoring/sdk_manifest.rs"]
mod sdk_manifest;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    build_commit();
    let out = PathBuf::from(env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=../plugin-sdk/Cargo.toml");
    println!("cargo:rerun-if-changed=../Cargo.toml");
    let manifest = sdk_manifest::standalone(
        &std::fs::read_to_string("../plugin-sdk/Cargo.toml")?,
        &std::fs::read_to_string("../Cargo.toml")?,
    )?;
    std::fs::write(out.join("plugin-sdk-Cargo.toml"), manifest)?;
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("PROTOC", protoc) };
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

/// Sets `CONDUCTOR_COMMIT`: `CONDUCTOR_REVISION` when set (the image build passes it, having no
/// `.git`), else the checkout's `HEAD`, else `unknown`. Runs again when `HEAD` moves.
fn build_commit() {
    println!("cargo:rerun-if-env-changed=CONDUCTOR_REVISION");
    let from_env = env::var("CONDUCTOR_REVISION")
        .ok()
        .filter(|r| !r.is_empty() && r != "unknown");
    let commit = from_env.or_else(|| {
        watch_git_head();
        git(&["rev-parse", "HEAD"])
    });
    let commit = commit.unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=CONDUCTOR_COMMIT={commit}");
}

/// Reruns the build script when the checkout's `HEAD` or the branch it names moves (only files
/// that exist: cargo reruns every time for a missing one).
fn watch_git_head() {
    let (Some(git_dir), Some(common_dir)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) else {
        return;
    };
    let head = PathBuf::from(&git_dir).join("HEAD");
    let mut watched = vec![head.clone(), PathBuf::from(&common_dir).join("packed-refs")];
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(branch) = text.trim().strip_prefix("ref: ")
    {
        watched.push(PathBuf::from(&common_dir).join(branch));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}
