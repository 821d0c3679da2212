//! A PKI for thousands of agents, made in-process (an `openssl` run per certificate would take
//! minutes): an ECDSA P-256 CA, a serving certificate for `localhost` and 127.0.0.1, and a client
//! certificate for each cluster's agent as OCM's registration issues them (ECDSA P-256 key,
//! subject CN `system:open-cluster-management:<cluster>:agent`, O
//! `system:open-cluster-management:<cluster>`), written as `<cluster>.crt` and `<cluster>.key`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};

pub struct ManyCerts {
    pub dir: PathBuf,
    ca: Certificate,
    ca_key: KeyPair,
}

fn params(cn: &str, organizations: &[&str]) -> CertificateParams {
    let mut params = CertificateParams::default();
    for o in organizations {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.distinguished_name.push(DnType::CommonName, cn);
    params
}

impl ManyCerts {
    /// A CA in `dir` (`ca.crt`) and the serving certificate `server.crt`/`server.key`.
    pub fn new(dir: &Path) -> Self {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca_params = params("conductor-bench-ca", &[]);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("the CA certificate");
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        let this = Self {
            dir: dir.to_owned(),
            ca,
            ca_key,
        };
        let mut server = params("conductor", &[]);
        server.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().unwrap()),
            SanType::IpAddress([127, 0, 0, 1].into()),
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        this.write("server", server);
        this
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn write(&self, name: &str, params: CertificateParams) {
        let key = KeyPair::generate().expect("a key");
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("a signed certificate");
        std::fs::write(self.dir.join(format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    /// A client certificate `<name>.crt`/`<name>.key` with subject CN `cn` and the organizations.
    pub fn client(&self, name: &str, cn: &str, organizations: &[&str]) {
        let mut client = params(cn, organizations);
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.write(name, client);
    }

    /// The agent of `cluster`'s certificate, `<cluster>.crt`/`<cluster>.key`.
    pub fn agent(&self, cluster: &str) {
        let group = format!("system:open-cluster-management:{cluster}");
        self.client(cluster, &format!("{group}:agent"), &[&group]);
    }

    /// A path with `{cluster}` for the load tool: `<dir>/{cluster}.<ext>`.
    pub fn per_cluster(&self, ext: &str) -> String {
        format!("{}/{{cluster}}.{ext}", self.dir.display())
    }
}
