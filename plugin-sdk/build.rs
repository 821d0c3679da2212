//! The contract version has one source of truth, the WIT package (`wit/plugin.wit`):
//! `SDK_VERSION` is read from it here.

fn main() {
    let wit = std::fs::read_to_string("wit/plugin.wit").expect("wit/plugin.wit is readable");
    let version = wit
        .lines()
        .find_map(|l| l.trim().strip_prefix("package conductor:plugin@"))
        .and_then(|rest| rest.strip_suffix(';'))
        .expect("wit/plugin.wit declares `package conductor:plugin@<version>;`");
    println!("cargo:rustc-env=CONDUCTOR_CONTRACT_VERSION={version}");
    println!("cargo:rerun-if-changed=wit/plugin.wit");
}
