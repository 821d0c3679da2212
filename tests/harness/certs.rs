//! A test PKI made with the machine's `openssl`: a CA, serving certificates and client
//! certificates (X.509 v3: rustls refuses v1).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA in `dir` (`<name>.crt`, `<name>.key`) that signs the certificates made with it.
pub struct Pki {
    pub dir: PathBuf,
    ca: String,
}

fn run(dir: &Path, args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pki {
    /// A new CA called `ca` (`ca.crt`, `ca.key`) in `dir`.
    pub fn new(dir: &Path, ca: &str) -> Self {
        let (key, crt) = (format!("{ca}.key"), format!("{ca}.crt"));
        run(
            dir,
            &[
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &crt,
                "-days",
                "2",
                "-subj",
                &format!("/CN={ca}"),
            ],
        );
        Self {
            dir: dir.to_owned(),
            ca: ca.to_owned(),
        }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join(format!("{}.crt", self.ca))
    }

    fn sign(&self, name: &str, subject: &str, extensions: &str) -> (PathBuf, PathBuf) {
        let (key, csr, crt, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        std::fs::write(self.dir.join(&ext), extensions).unwrap();
        run(
            &self.dir,
            &[
                "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
            ],
        );
        let (ca_crt, ca_key) = (format!("{}.crt", self.ca), format!("{}.key", self.ca));
        run(
            &self.dir,
            &[
                "openssl",
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca_crt,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
        (self.dir.join(crt), self.dir.join(key))
    }

    /// A serving certificate for 127.0.0.1 and localhost with subject CN `cn`: (cert, key).
    pub fn server(&self, name: &str, cn: &str) -> (PathBuf, PathBuf) {
        self.sign(
            name,
            &format!("/CN={cn}"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
    }

    /// A client certificate with subject CN `cn` and one O per organization: (cert, key).
    pub fn client(&self, name: &str, cn: &str, organizations: &[&str]) -> (PathBuf, PathBuf) {
        let orgs: String = organizations.iter().map(|o| format!("/O={o}")).collect();
        self.sign(name, &format!("{orgs}/CN={cn}"), "extendedKeyUsage=clientAuth\n")
    }
}

impl Pki {
    /// An agent connected to `c` over TLS, trusting this CA, with the client certificate
    /// `client` (as made by [`Pki::client`]) if given.
    pub async fn agent(
        &self,
        c: &crate::Conductor,
        client: Option<&str>,
    ) -> crate::CloudEventServiceClient<tonic::transport::Channel> {
        use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
        let read = |name: &str| std::fs::read(self.dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(std::fs::read(self.ca()).expect("the CA")))
            .domain_name("localhost");
        if let Some(name) = client {
            tls = tls.identity(Identity::from_pem(
                read(&format!("{name}.crt")),
                read(&format!("{name}.key")),
            ));
        }
        let port = c.grpc_addr.rsplit(':').next().expect("host:port");
        let channel = Channel::from_shared(format!("https://localhost:{port}"))
            .expect("a valid URI")
            .tls_config(tls)
            .expect("a valid TLS configuration")
            .connect()
            .await
            .expect("TLS connection to conductor");
        crate::CloudEventServiceClient::new(channel)
    }
}
