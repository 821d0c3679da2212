//! `embedded`: a local PostgreSQL for development, run from the machine's PostgreSQL binaries in a
//! data folder of its own, and stopped when conductor stops. It listens on a Unix socket in its
//! data folder (so it never competes for a TCP port), and on 127.0.0.1 only when a port is
//! configured.
//!
//! The database it holds is created on first start and the configured SQL files (`init_sql`, e.g.
//! the schema a plugin ships) run into it then — only into a database this host created itself.
//! The host knows nothing of what the SQL is.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::config::EmbeddedDatabase;

/// The port number of the socket file (`.s.PGSQL.<port>`) when no TCP port is configured.
const SOCKET_PORT: u16 = 5432;

/// Why the embedded database did not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("no PostgreSQL binaries found (looked in {0}); install PostgreSQL or set bin_dir")]
    NoBinaries(String),
    #[error("{step} failed: {detail}")]
    Step { step: String, detail: String },
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
}

/// A running embedded PostgreSQL. Stopped on [`EmbeddedPostgres::stop`] or drop.
pub struct EmbeddedPostgres {
    bin: PathBuf,
    data: PathBuf,
    database: String,
    /// The port of the socket file, and on 127.0.0.1 when `tcp`.
    port: u16,
    tcp: bool,
    /// Run the server's commands as `postgres` (PostgreSQL refuses to run as root).
    as_postgres: bool,
    running: bool,
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|uids| uids.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

/// The newest `/usr/lib/postgresql/<version>/bin`, or `bin_dir` when given.
fn find_binaries(bin_dir: Option<&Path>) -> Result<PathBuf, EmbeddedError> {
    if let Some(dir) = bin_dir {
        return Ok(dir.to_owned());
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| EmbeddedError::NoBinaries(root.display().to_string()))
}

impl EmbeddedPostgres {
    /// Initialises the data folder if it is new, starts the server, and creates the database
    /// (running `init_sql` into it) if it does not exist. Paths in `config` are absolute.
    pub fn start(config: &EmbeddedDatabase) -> Result<Self, EmbeddedError> {
        let bin = find_binaries(config.bin_dir.as_deref())?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| EmbeddedError::Io(config.data_dir.display().to_string(), e))?;
        let data = std::fs::canonicalize(&config.data_dir)
            .map_err(|e| EmbeddedError::Io(config.data_dir.display().to_string(), e))?;
        let mut pg = Self {
            bin,
            data,
            database: config.database.clone(),
            port: config.port.unwrap_or(SOCKET_PORT),
            tcp: config.port.is_some(),
            as_postgres: running_as_root(),
            running: false,
        };
        if pg.as_postgres {
            pg.run(
                "chown",
                Command::new("chown").arg("-R").arg("postgres:postgres").arg(&pg.data),
            )?;
            let reachable = Command::new("runuser")
                .args(["-u", "postgres", "--", "test", "-w"])
                .arg(&pg.data)
                .status()
                .is_ok_and(|s| s.success());
            if !reachable {
                return Err(EmbeddedError::Step {
                    step: "data_dir".into(),
                    detail: format!(
                        "the postgres user cannot reach {} (PostgreSQL refuses to run as root); make its parent folders traversable (chmod o+x) or put data_dir elsewhere",
                        pg.data.display()
                    ),
                });
            }
        }
        if !pg.data.join("PG_VERSION").exists() {
            let mut initdb = pg.server_command("initdb");
            initdb
                .arg("-D")
                .arg(&pg.data)
                .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
            pg.run("initdb", &mut initdb)?;
        }
        pg.resume()?;
        let database = pg.database.clone();
        let exists = pg.psql(
            "postgres",
            &[
                "-tAc",
                &format!("SELECT 1 FROM pg_database WHERE datname = '{database}'"),
            ],
        )?;
        if exists.trim() != "1" {
            if database != "postgres" {
                pg.psql("postgres", &["-c", &format!("CREATE DATABASE {database}")])?;
            }
            for file in &config.init_sql {
                let path = file.to_string_lossy();
                pg.psql(&database, &["-v", "ON_ERROR_STOP=1", "-q", "-f", &path])
                    .map_err(|e| EmbeddedError::Step {
                        step: format!("init_sql {}", file.display()),
                        detail: e.to_string(),
                    })?;
                tracing::info!(database, file = %file.display(), "ran SQL into the new embedded database");
            }
        }
        Ok(pg)
    }

    /// `postgres://postgres@localhost/<database>?host=<data folder>`: the Unix socket.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@localhost:{}/{}?host={}",
            self.port,
            self.database,
            percent_encode(&self.data.to_string_lossy())
        )
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>`, when a TCP port is configured.
    pub fn tcp_url(&self) -> Option<String> {
        self.tcp
            .then(|| format!("postgres://postgres@127.0.0.1:{}/{}", self.port, self.database))
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Starts the server on its initialised folder (after [`EmbeddedPostgres::stop`]).
    pub fn resume(&mut self) -> Result<(), EmbeddedError> {
        if self.running {
            return Ok(());
        }
        let listen = if self.tcp { "127.0.0.1" } else { "''" };
        let options = format!(
            "-p {} -k {} -c listen_addresses={listen} -c fsync=off",
            self.port,
            self.data.display()
        );
        let mut start = self.server_command("pg_ctl");
        start
            .arg("-D")
            .arg(&self.data)
            .args(["-o", &options, "-l"])
            .arg(self.data.join("server.log"))
            .args(["-w", "start"]);
        self.run("pg_ctl start", &mut start)?;
        self.running = true;
        Ok(())
    }

    /// Stops the server (fast shutdown: open sessions are ended).
    pub fn stop(&mut self) -> Result<(), EmbeddedError> {
        if !self.running {
            return Ok(());
        }
        let mut stop = self.server_command("pg_ctl");
        stop.arg("-D").arg(&self.data).args(["-m", "fast", "-w", "stop"]);
        self.run("pg_ctl stop", &mut stop)?;
        self.running = false;
        tracing::info!(data_dir = %self.data.display(), "embedded database stopped");
        Ok(())
    }

    /// A server binary, run as `postgres` when we are root.
    fn server_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn psql(&self, database: &str, args: &[&str]) -> Result<String, EmbeddedError> {
        let psql = [self.bin.join("psql"), PathBuf::from("psql")]
            .into_iter()
            .find(|p| p.is_absolute() && p.exists())
            .unwrap_or_else(|| PathBuf::from("psql"));
        let mut c = Command::new(psql);
        c.args(["-X", "-h"])
            .arg(&self.data)
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", database])
            .args(args);
        let out = self.run("psql", &mut c)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn run(&self, step: &str, command: &mut Command) -> Result<Output, EmbeddedError> {
        let out = command.output().map_err(|e| EmbeddedError::Io(step.to_owned(), e))?;
        if out.status.success() {
            return Ok(out);
        }
        let mut detail = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if step.starts_with("pg_ctl") {
            // The server's own log says why it did not start.
            if let Ok(log) = std::fs::read_to_string(self.data.join("server.log")) {
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                detail = format!(
                    "{detail}; server log: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                );
            }
        }
        Err(EmbeddedError::Step {
            step: step.to_owned(),
            detail,
        })
    }
}

/// Percent-encodes what a URL query value cannot hold as it is.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

impl Drop for EmbeddedPostgres {
    /// A backstop for paths that did not [`EmbeddedPostgres::stop`] it: `pg_ctl stop` waits for
    /// the server, so inside an async runtime it runs on the runtime's blocking threads (which the
    /// runtime waits for when it shuts down), never on the worker dropping it.
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        let stopper = Stopper(Self {
            bin: std::mem::take(&mut self.bin),
            data: std::mem::take(&mut self.data),
            database: std::mem::take(&mut self.database),
            port: self.port,
            tcp: self.tcp,
            as_postgres: self.as_postgres,
            running: std::mem::replace(&mut self.running, false),
        });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(stopper))),
            Err(_) => drop(stopper),
        }
    }
}

/// Stops a server when dropped, where it is dropped: on a blocking thread, or (a runtime that
/// is shutting down drops the task instead of running it) on the thread shutting it down.
struct Stopper(EmbeddedPostgres);

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Err(e) = self.0.stop() {
            tracing::warn!(error = %e, "embedded database did not stop cleanly");
        }
        self.0.running = false;
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A server dropped on an async worker is stopped on a blocking thread: the worker is not
    /// held while `pg_ctl stop` waits, and the runtime waits for the stop before it ends.
    #[test]
    fn dropped_on_a_runtime_it_stops_off_the_worker() {
        let dir = tempfile::tempdir().unwrap();
        // The server may run as `postgres` (when the tests run as root): let it reach the folder.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let config = EmbeddedDatabase {
            data_dir: dir.path().join("pg"),
            database: "postgres".into(),
            init_sql: vec![],
            port: None,
            bin_dir: None,
        };
        let pid_file = config.data_dir.join("postmaster.pid");
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let server = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&config))
                .await
                .unwrap()
                .unwrap();
            assert!(pid_file.exists(), "the server runs");
            drop(server);
            // Had the drop waited for `pg_ctl stop -w` on this (only) worker, the server would be
            // gone by now.
            assert!(
                pid_file.exists(),
                "the stop waits on a blocking thread, not on the worker"
            );
        });
        drop(runtime);
        assert!(!pid_file.exists(), "the runtime waited for the stop before it ended");
    }
}
