//! The conductor builds a bench measures: `CONDUCTOR_BIN` (or the binary beside the bench), and
//! with `CONDUCTOR_BIN_B` another build run beside it in the same bench process, so a change is
//! measured against the build before it on the same machine in the same minutes.
//!
//! A build is its binary and the target directory it sits in (`<dir>/release/conductor`), where
//! its plugins are found as for build A (`<dir>/wasm32-wasip2/plugin/`, `<dir>/release/`). A
//! configuration written for build A is moved to build B by pointing every path into A's target
//! directory into B's.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::{Conductor, conductor_bin, median};

/// One build a bench runs.
#[derive(Debug, Clone)]
pub struct Build {
    /// `A` or `B`, as the bench prints it.
    pub label: &'static str,
    pub bin: PathBuf,
}

impl Build {
    /// The target directory the binary was built in (`<dir>/release/conductor` → `<dir>`).
    fn target_dir(&self) -> &Path {
        self.bin
            .parent()
            .and_then(Path::parent)
            .expect("a conductor binary sits in <target>/<profile>/")
    }

    /// `config`, written for build A (plugin files under its target directory), for this build.
    pub fn config(&self, config: &str, a: &Build) -> String {
        let dir = |b: &Build| format!("{}/", b.target_dir().display());
        config.replace(&dir(a), &dir(self))
    }

    /// How the build is named in a printed line: ` A` or ` B`, nothing when it is the only one.
    pub fn named(&self, builds: &[Build]) -> String {
        if builds.len() > 1 {
            format!(" {}", self.label)
        } else {
            String::new()
        }
    }

    /// Starts this build with `config` (written for build A) and waits until it serves gRPC.
    pub fn start(&self, config: &str, a: &Build) -> Result<Conductor> {
        Conductor::start_command(Command::new(&self.bin), &self.config(config, a))
    }
}

/// Build A, and build B when `CONDUCTOR_BIN_B` names one.
pub fn builds() -> Vec<Build> {
    let mut builds = vec![Build {
        label: "A",
        bin: conductor_bin(),
    }];
    if let Some(bin) = std::env::var_os("CONDUCTOR_BIN_B") {
        let bin = PathBuf::from(bin);
        assert!(bin.exists(), "CONDUCTOR_BIN_B: {} is missing", bin.display());
        builds.push(Build { label: "B", bin });
    }
    builds
}

/// The order run `run` starts the builds in: A B in even runs, B A in odd ones, so each build goes
/// first as often as the other (on this machine whatever runs first in a run measures
/// differently from what runs second).
pub fn in_turn(builds: &[Build], run: usize) -> Vec<(usize, &Build)> {
    let mut order: Vec<(usize, &Build)> = builds.iter().enumerate().collect();
    if run % 2 == 1 {
        order.reverse();
    }
    order
}

/// B against A, each a figure per run beside the floor of the same run: the median of the runs'
/// B / A, and the median of each build's ratios to its runs' floors.
pub fn compared(a: &[f64], b: &[f64], floor: &[f64]) -> String {
    let of_floor = |c: &[f64]| median(c.iter().zip(floor).map(|(c, f)| c / f).collect());
    format!(
        "B / A {:.3} (median of the runs' ratios); to the floor of each run A {:.2}×, B {:.2}×",
        median(b.iter().zip(a).map(|(b, a)| b / a).collect()),
        of_floor(a),
        of_floor(b)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(label: &'static str, bin: &str) -> Build {
        Build { label, bin: bin.into() }
    }

    #[test]
    fn a_configuration_for_build_a_points_into_build_bs_target_directory() {
        let (a, b) = (
            build("A", "/t/a/release/conductor"),
            build("B", "/t/b/release/conductor"),
        );
        let config = "file = \"/t/a/wasm32-wasip2/plugin/kube_plugin.wasm\"\nother = \"/t/ab\"\n";
        assert_eq!(
            b.config(config, &a),
            "file = \"/t/b/wasm32-wasip2/plugin/kube_plugin.wasm\"\nother = \"/t/ab\"\n"
        );
        assert_eq!(a.config(config, &a), config);
    }

    #[test]
    fn each_build_goes_first_in_every_other_run() {
        let builds = [build("A", "/a/r/c"), build("B", "/b/r/c")];
        let labels = |run| in_turn(&builds, run).iter().map(|(_, b)| b.label).collect::<Vec<_>>();
        assert_eq!(labels(0), ["A", "B"]);
        assert_eq!(labels(1), ["B", "A"]);
        assert_eq!(labels(2), ["A", "B"]);
        assert_eq!(in_turn(&builds[..1], 1)[0].1.label, "A");
    }

    #[test]
    fn builds_are_compared_run_by_run() {
        let (a, b, floor) = ([100.0, 200.0, 300.0], [110.0, 180.0, 330.0], [50.0, 100.0, 100.0]);
        assert_eq!(
            compared(&a, &b, &floor),
            "B / A 1.100 (median of the runs' ratios); to the floor of each run A 2.00×, B 2.20×"
        );
    }

    #[test]
    fn a_build_is_named_only_beside_another() {
        let builds = [build("A", "/a/r/c"), build("B", "/b/r/c")];
        assert_eq!(builds[1].named(&builds), " B");
        assert_eq!(builds[0].named(&builds[..1]), "");
    }
}
