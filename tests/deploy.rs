//! The deployment manifests (`deploy/`): every overlay renders with `kubectl kustomize`, every
//! rendered object parses into its typed Kubernetes struct (with no field left over, so a
//! misspelt field fails), and the objects agree with each other and with the `conductor.toml`
//! they ship: the ConfigMap the Deployment mounts and the file its command line reads, the
//! Secrets and keys behind every file the configuration reads, the ports and probe paths the
//! configuration actually serves, the ServiceAccount, and RBAC that grants exactly what the
//! configured plugins' `kube_resources` and the `[auth]` section need — read from the
//! configuration with the host's own types, not from a second list. The configuration passes
//! `conductor check-config` with the plugins `scripts/build-plugins.sh` built.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use conductor::config::{AdminAuthorization, Authenticator, Authorization, Config};
use conductor_blackbox_tests::conductor_bin;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Container, Namespace, PodSpec, Probe, Service, ServiceAccount, Volume},
        policy::v1::PodDisruptionBudget,
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
    serde::{Serialize, de::DeserializeOwned},
};
use serde_json::Value;

const OVERLAYS: [&str; 2] = ["kube", "kube-maestro"];
/// The annotation naming the part of `conductor.toml` a ClusterRole grants for: `auth` or
/// `plugins.<name>`.
const RBAC_FOR: &str = "conductor/rbac-for";
const CONTAINER: &str = "conductor";
/// The operator's guide: it names every Secret and key the manifests mount, and the address agents dial.
const DEPLOY_GUIDE: &str = "docs/how-to/deploy.md";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository")
        .to_owned()
}

fn kubectl() -> PathBuf {
    std::env::var_os("CONDUCTOR_KUBECTL")
        .expect("CONDUCTOR_KUBECTL is not set: run scripts/setup-test-env.sh (the README's test command does)")
        .into()
}

/// `kubectl kustomize deploy/overlays/<overlay>`.
fn render(overlay: &str) -> String {
    kustomize(&repo().join("deploy/overlays").join(overlay))
}

/// `kubectl kustomize dir` (files outside `dir` allowed, as an operator's overlay of ours has).
fn kustomize(dir: &Path) -> String {
    let out = Command::new(kubectl())
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(dir)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

/// Every object of one rendered overlay, typed.
#[derive(Clone, Debug, Default)]
struct Rendered {
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    config_maps: Vec<ConfigMap>,
    services: Vec<Service>,
    deployments: Vec<Deployment>,
    budgets: Vec<PodDisruptionBudget>,
    roles: Vec<ClusterRole>,
    bindings: Vec<ClusterRoleBinding>,
}

/// The first place where `a` and `b` differ, as a JSON path.
fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).find_map(|k| match (x.get(k), y.get(k)) {
            (Some(p), Some(q)) => difference(p, q, &format!("{at}.{k}")),
            _ => Some(format!("{at}.{k}")),
        }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| difference(p, q, &format!("{at}[{i}]"))),
        _ => (a != b).then(|| at.to_owned()),
    }
}

/// `object` as its typed struct; a field the struct does not know (a typo, a field of another
/// API version) is an error, found by writing the struct back and comparing.
fn typed<T: DeserializeOwned + Serialize>(object: &Value, what: &str) -> Result<T> {
    let value: T = serde_json::from_value(object.clone()).with_context(|| format!("{what} does not parse"))?;
    let back = serde_json::to_value(&value)?;
    if let Some(at) = difference(object, &back, "") {
        bail!("{what}: `{at}` is not a field of its type (or does not survive a round trip)");
    }
    Ok(value)
}

fn parse(yaml: &str) -> Result<Rendered> {
    let objects: Vec<Value> = serde_saphyr::from_multiple(yaml).context("rendered YAML")?;
    let mut r = Rendered::default();
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default().to_owned();
        let what = format!("{kind} {}", o["metadata"]["name"]);
        match (o["apiVersion"].as_str().unwrap_or_default(), kind.as_str()) {
            ("v1", "Namespace") => r.namespaces.push(typed(&o, &what)?),
            ("v1", "ServiceAccount") => r.service_accounts.push(typed(&o, &what)?),
            ("v1", "ConfigMap") => r.config_maps.push(typed(&o, &what)?),
            ("v1", "Service") => r.services.push(typed(&o, &what)?),
            ("apps/v1", "Deployment") => r.deployments.push(typed(&o, &what)?),
            ("policy/v1", "PodDisruptionBudget") => r.budgets.push(typed(&o, &what)?),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => r.roles.push(typed(&o, &what)?),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => r.bindings.push(typed(&o, &what)?),
            (api, _) => bail!("{what} ({api}): a kind this test does not check"),
        }
    }
    Ok(r)
}

/// (API group, resource[/subresource], verb): one thing the ServiceAccount may do.
type Permission = (String, String, String);

/// What the part of the configuration named `holder` (`auth`, `plugins.<name>`) needs from the
/// API server, derived from the configuration alone.
fn needs(config: &Config) -> BTreeMap<String, BTreeSet<Permission>> {
    let p = |g: &str, r: &str, v: &str| (g.to_owned(), r.to_owned(), v.to_owned());
    let mut out = BTreeMap::new();
    let mut auth = BTreeSet::new();
    if config
        .auth
        .authenticators(&config.server)
        .contains(&Authenticator::Token)
    {
        auth.insert(p("authentication.k8s.io", "tokenreviews", "create"));
    }
    if config.auth.authorization == Authorization::Sar {
        auth.insert(p("authorization.k8s.io", "subjectaccessreviews", "create"));
    }
    // The admin endpoint's callers: a TokenReview, then a SubjectAccessReview.
    if config.admin.authorization == AdminAuthorization::Sar {
        auth.insert(p("authentication.k8s.io", "tokenreviews", "create"));
        auth.insert(p("authorization.k8s.io", "subjectaccessreviews", "create"));
    }
    out.insert("auth".to_owned(), auth);
    for (name, plugin) in &config.plugins {
        let mut set = BTreeSet::new();
        for grant in &plugin.kube_resources {
            let (group, plural, sub) = grant.parts();
            let resource = match sub {
                Some(s) => format!("{plural}/{s}"),
                None => plural.to_owned(),
            };
            for verb in grant.verbs() {
                set.insert(p(group, &resource, verb));
                // The host's watch (kube-runtime's watcher) lists, then watches.
                if verb == "watch" {
                    set.insert(p(group, &resource, "list"));
                }
            }
        }
        out.insert(format!("plugins.{name}"), set);
    }
    out
}

fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && selector
            .match_labels
            .as_ref()
            .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// The container port `port` names (by name or number).
fn container_port(c: &Container, port: &IntOrString) -> Option<u16> {
    let ports = c.ports.as_deref().unwrap_or_default();
    let found = match port {
        IntOrString::Int(n) => ports.iter().find(|p| p.container_port == *n),
        IntOrString::String(name) => ports.iter().find(|p| p.name.as_deref() == Some(name)),
    };
    found.and_then(|p| u16::try_from(p.container_port).ok())
}

/// The volume mounted at the longest mount path above `file`, and `file` relative to it.
fn mount_of<'a>(pod: &'a PodSpec, c: &Container, file: &Path) -> Option<(&'a Volume, PathBuf)> {
    let mount = c
        .volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|m| file.starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len())?;
    let volume = pod.volumes.as_deref()?.iter().find(|v| v.name == mount.name)?;
    let rest = file.strip_prefix(&mount.mount_path).ok()?.to_owned();
    Some((volume, rest))
}

fn listens_everywhere(addr: SocketAddr) -> bool {
    addr.ip().is_unspecified()
}

/// Everything wrong with one rendered overlay (empty: nothing).
fn problems(r: &Rendered, check_config: bool) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(e) = check(r, check_config, &mut out) {
        out.push(format!("{e:#}"));
    }
    out
}

fn one<'a, T>(items: &'a [T], what: &str) -> Result<&'a T> {
    match items {
        [one] => Ok(one),
        _ => bail!("{} {what} rendered, want exactly one", items.len()),
    }
}

fn check(r: &Rendered, check_config: bool, out: &mut Vec<String>) -> Result<()> {
    let mut problem = |p: String| out.push(p);

    // --- Namespace ----------------------------------------------------------------------
    let ns = one(&r.namespaces, "Namespaces")?
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    let namespaced = r
        .service_accounts
        .iter()
        .map(|o| (&o.metadata, "ServiceAccount"))
        .chain(r.config_maps.iter().map(|o| (&o.metadata, "ConfigMap")))
        .chain(r.services.iter().map(|o| (&o.metadata, "Service")))
        .chain(r.deployments.iter().map(|o| (&o.metadata, "Deployment")))
        .chain(r.budgets.iter().map(|o| (&o.metadata, "PodDisruptionBudget")));
    for (meta, kind) in namespaced {
        if meta.namespace.as_deref() != Some(ns.as_str()) {
            problem(format!(
                "{kind} {:?} is in namespace {:?}, not {ns:?}",
                meta.name, meta.namespace
            ));
        }
    }

    // --- The Deployment, its pod and container --------------------------------------------
    let deployment = one(&r.deployments, "Deployments")?;
    let spec = &deployment.spec;
    let replicas = spec.replicas.unwrap_or(1);
    if replicas < 2 {
        problem(format!("Deployment runs {replicas} replica(s): want several"));
    }
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if !matches(&spec.selector, &pod_labels) {
        problem("the Deployment's selector does not select its own pods".into());
    }
    let pod = spec.template.spec.as_ref().context("pod template without spec")?;
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == CONTAINER)
        .context("no container named conductor")?;

    let anti = pod.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref());
    let terms: Vec<_> = anti
        .into_iter()
        .flat_map(|a| {
            let required = a.required_during_scheduling_ignored_during_execution.iter().flatten();
            let preferred = a
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .map(|w| &w.pod_affinity_term);
            required.chain(preferred)
        })
        .collect();
    if !terms.iter().any(|t| t.topology_key == "kubernetes.io/hostname") {
        problem("no pod anti-affinity across nodes (topology key kubernetes.io/hostname)".into());
    }
    for t in &terms {
        if !t.label_selector.as_ref().is_some_and(|s| matches(s, &pod_labels)) {
            problem(format!(
                "the anti-affinity term on {} does not select conductor's pods",
                t.topology_key
            ));
        }
    }

    // The image: named, no registry (operators set theirs with an `images:` entry).
    let image = container.image.as_deref().unwrap_or_default();
    if image.is_empty() || image.contains('/') {
        problem(format!("image {image:?}: want a bare name such as conductor:latest"));
    }

    // Security context: pod-level settings count where the container has none.
    let psc = pod.security_context.as_ref();
    let csc = container.security_context.as_ref();
    let run_as_non_root = csc
        .and_then(|s| s.run_as_non_root)
        .or(psc.and_then(|s| s.run_as_non_root));
    if run_as_non_root != Some(true) {
        problem("runAsNonRoot is not true".into());
    }
    if csc.and_then(|s| s.run_as_user).or(psc.and_then(|s| s.run_as_user)) == Some(0) {
        problem("runs as uid 0".into());
    }
    if csc.and_then(|s| s.read_only_root_filesystem) != Some(true) {
        problem("readOnlyRootFilesystem is not true".into());
    }
    if csc.and_then(|s| s.allow_privilege_escalation) != Some(false) {
        problem("allowPrivilegeEscalation is not false".into());
    }
    if csc.and_then(|s| s.privileged) == Some(true) {
        problem("the container is privileged".into());
    }
    let caps = csc.and_then(|s| s.capabilities.as_ref());
    if !caps
        .and_then(|c| c.drop.as_ref())
        .is_some_and(|d| d.iter().any(|x| x == "ALL"))
    {
        problem("capabilities: ALL is not dropped".into());
    }
    if caps.and_then(|c| c.add.as_ref()).is_some_and(|a| !a.is_empty()) {
        problem("capabilities are added".into());
    }
    let seccomp = csc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or(psc.and_then(|s| s.seccomp_profile.as_ref()));
    if seccomp.map(|s| s.type_.as_str()) != Some("RuntimeDefault") {
        problem("seccomp profile is not RuntimeDefault".into());
    }

    // Resources.
    let res = container.resources.as_ref();
    for (kind, map) in [
        ("requests", res.and_then(|r| r.requests.as_ref())),
        ("limits", res.and_then(|r| r.limits.as_ref())),
    ] {
        if !map.is_some_and(|m| m.contains_key("memory")) {
            problem(format!("no memory {kind}"));
        }
    }
    if !res
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|m| m.contains_key("cpu"))
    {
        problem("no cpu request".into());
    }

    // Every mount names a volume, every volume is mounted.
    let volumes = pod.volumes.as_deref().unwrap_or_default();
    let mounts = container.volume_mounts.as_deref().unwrap_or_default();
    for m in mounts {
        if !volumes.iter().any(|v| v.name == m.name) {
            problem(format!("volume mount {} names no volume", m.mount_path));
        }
    }
    for v in volumes {
        if !mounts.iter().any(|m| m.name == v.name) {
            problem(format!("volume {} is mounted nowhere", v.name));
        }
    }

    // --- The configuration: the file the command line names, in the mounted ConfigMap --------
    let command: Vec<&str> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(String::as_str)
        .collect();
    if command.first() != Some(&"/usr/local/bin/conductor") || command.get(1) != Some(&"serve") {
        problem(format!(
            "the container runs {command:?}: want /usr/local/bin/conductor serve …"
        ));
    }
    let config_path = command
        .iter()
        .position(|a| *a == "--config")
        .and_then(|i| command.get(i + 1))
        .map(PathBuf::from)
        .context("the command line names no --config")?;
    let (volume, key) = mount_of(pod, container, &config_path)
        .with_context(|| format!("nothing is mounted at {}", config_path.display()))?;
    let cm_name = &volume
        .config_map
        .as_ref()
        .with_context(|| format!("{} is not from a ConfigMap", config_path.display()))?
        .name;
    let cm = r
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_ref() == Some(cm_name))
        .with_context(|| format!("the Deployment mounts ConfigMap {cm_name}, which is not rendered"))?;
    let key = key.to_string_lossy().into_owned();
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(&key))
        .with_context(|| format!("ConfigMap {cm_name} has no key {key:?}"))?;
    let config = Config::parse(text).map_err(|(k, reason)| anyhow::anyhow!("conductor.toml: {k}: {reason}"))?;
    let config_dir = config_path.parent().unwrap_or(Path::new("/"));

    // --- Files the configuration reads: each one a key of a mounted Secret -----------------
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    if let Some(tls) = &config.server.tls {
        files.push(("server.tls.cert_file".into(), tls.cert_file.clone()));
        files.push(("server.tls.key_file".into(), tls.key_file.clone()));
        if let Some(ca) = &tls.client_ca_file {
            files.push(("server.tls.client_ca_file".into(), ca.clone()));
        }
    } else {
        problem("conductor.toml serves no TLS ([server.tls])".into());
    }
    match &config.admin.tls {
        Some(tls) => {
            files.push(("admin.tls.cert_file".into(), tls.cert_file.clone()));
            files.push(("admin.tls.key_file".into(), tls.key_file.clone()));
        }
        None => problem(
            "the admin endpoint serves no TLS ([admin.tls]): its tokens would cross the network in the clear".into(),
        ),
    }
    if config.admin.authorization != AdminAuthorization::Sar {
        problem("the admin endpoint is open to anyone who reaches it: set [admin] authorization = \"sar\"".into());
    }
    for (name, db) in &config.databases {
        if db.url.is_some() {
            problem(format!(
                "databases.{name}.url is written in the ConfigMap: take it from a Secret (url_file)"
            ));
        }
        if db.embedded.is_some() {
            problem(format!("databases.{name} is an embedded development database"));
        }
        for (field, file) in [("url_file", &db.url_file), ("ca_file", &db.ca_file)] {
            if let Some(f) = file {
                files.push((format!("databases.{name}.{field}"), f.clone()));
            }
        }
    }
    if let Some(k) = &config.kubernetes.kubeconfig {
        files.push(("kubernetes.kubeconfig".into(), k.clone()));
    }
    let mut secret_files_read = BTreeSet::new();
    for (field, file) in &files {
        let file = config_dir.join(file);
        let Some((volume, rest)) = mount_of(pod, container, &file) else {
            problem(format!("{field} = {}: nothing is mounted there", file.display()));
            continue;
        };
        let Some(secret) = &volume.secret else {
            problem(format!(
                "{field} = {}: volume {} is not a Secret",
                file.display(),
                volume.name
            ));
            continue;
        };
        let rest = rest.to_string_lossy();
        if !secret.items.iter().flatten().any(|i| i.path == rest) {
            problem(format!(
                "{field} = {}: Secret {:?} (volume {}) provides no {rest}",
                file.display(),
                secret.secret_name,
                volume.name
            ));
        }
        secret_files_read.insert((volume.name.clone(), rest.into_owned()));
    }
    let readme = std::fs::read_to_string(repo().join(DEPLOY_GUIDE)).unwrap_or_default();
    for v in volumes {
        let Some(secret) = &v.secret else { continue };
        let name = secret.secret_name.clone().unwrap_or_default();
        if secret.optional == Some(true) {
            problem(format!("Secret {name} is optional"));
        }
        let items = secret.items.as_deref().unwrap_or_default();
        if items.is_empty() {
            problem(format!("Secret {name}: list the keys it must hold (items)"));
        }
        for i in items {
            if !secret_files_read.contains(&(v.name.clone(), i.path.clone())) {
                problem(format!(
                    "Secret {name} key {} is mounted but conductor.toml reads no such file",
                    i.key
                ));
            }
            if !readme.contains(&format!("`{}`", i.key)) {
                problem(format!(
                    "{DEPLOY_GUIDE} does not document key `{}` of Secret {name}",
                    i.key
                ));
            }
        }
        if !readme.contains(&format!("`{name}`")) {
            problem(format!("{DEPLOY_GUIDE} does not document Secret `{name}`"));
        }
    }

    // --- Plugins: bundled in the image, found by name in plugin_folder ----------------------
    match &config.plugin_folder {
        Some(folder) if folder.is_absolute() => {
            if mounts.iter().any(|m| folder.starts_with(&m.mount_path)) {
                problem(format!(
                    "a volume is mounted over the plugin folder {}",
                    folder.display()
                ));
            }
        }
        other => problem(format!("plugin_folder is {other:?}: want the image's absolute folder")),
    }
    for (name, plugin) in &config.plugins {
        let file = plugin.file.as_deref().unwrap_or(Path::new(""));
        if file.components().count() != 1 || !repo().join("plugins/dist").join(file).exists() {
            problem(format!(
                "plugins.{name}.file = {}: want a default plugin, by name",
                file.display()
            ));
        }
    }

    // --- Ports and probes -------------------------------------------------------------------
    let grpc_port = config.server.listen.port();
    let admin_port = config.admin.listen.port();
    if !config.admin.enabled {
        problem("[admin] is disabled: nothing serves the probes".into());
    }
    for (key, addr) in [
        ("server.listen", config.server.listen),
        ("admin.listen", config.admin.listen),
    ] {
        if !listens_everywhere(addr) {
            problem(format!("{key} = {addr}: the pod's IP cannot reach it"));
        }
    }
    let declared: BTreeSet<u16> = container
        .ports
        .iter()
        .flatten()
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .collect();
    if declared != BTreeSet::from([grpc_port, admin_port]) {
        problem(format!(
            "container ports {declared:?}, but conductor.toml serves gRPC on {grpc_port} and admin on {admin_port}"
        ));
    }
    let probe = |p: &Option<Probe>, what: &str, path: &str, required: bool| -> Option<String> {
        let Some(p) = p else {
            return required.then(|| format!("no {what} probe"));
        };
        let Some(get) = &p.http_get else {
            return Some(format!("the {what} probe is not an HTTP GET"));
        };
        let port = container_port(container, &get.port);
        let scheme = if config.admin.tls.is_some() { "HTTPS" } else { "HTTP" };
        if get.path.as_deref() != Some(path)
            || port != Some(admin_port)
            || get.scheme.as_deref().unwrap_or("HTTP") != scheme
        {
            return Some(format!(
                "the {what} probe asks {:?} {:?} on port {port:?}: the admin endpoint serves {path} over {scheme} on {admin_port}",
                get.scheme, get.path
            ));
        }
        None
    };
    for p in [
        probe(&container.liveness_probe, "liveness", "/healthz", true),
        probe(&container.readiness_probe, "readiness", "/readyz", true),
        probe(&container.startup_probe, "startup", "/healthz", false),
    ]
    .into_iter()
    .flatten()
    {
        problem(p);
    }

    // --- Services ----------------------------------------------------------------------------
    let mut targets = BTreeSet::new();
    for s in &r.services {
        let name = s.metadata.name.clone().unwrap_or_default();
        let Some(spec) = &s.spec else {
            problem(format!("Service {name} has no spec"));
            continue;
        };
        let selects = spec
            .selector
            .as_ref()
            .is_some_and(|sel| !sel.is_empty() && sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
        if !selects {
            problem(format!("Service {name} does not select conductor's pods"));
        }
        let mut mine = BTreeSet::new();
        for p in spec.ports.iter().flatten() {
            let target = p.target_port.clone().unwrap_or(IntOrString::Int(p.port));
            match container_port(container, &target) {
                Some(port) => {
                    mine.insert(port);
                }
                None => problem(format!(
                    "Service {name} port {} targets {target:?}, which the container does not declare",
                    p.port
                )),
            }
        }
        if mine.contains(&grpc_port) && mine.contains(&admin_port) {
            problem(format!(
                "Service {name} exposes the admin port beside gRPC: keep the unauthenticated admin endpoint on a Service of its own"
            ));
        }
        targets.extend(mine);
    }
    for (what, port) in [("gRPC", grpc_port), ("admin", admin_port)] {
        if !targets.contains(&port) {
            problem(format!("no Service reaches the {what} port {port}"));
        }
    }
    // The address the deploy guide gives agents.
    if let Some(s) = r.services.iter().find(|s| {
        s.spec.iter().flat_map(|s| s.ports.iter().flatten()).any(|p| {
            container_port(container, p.target_port.as_ref().unwrap_or(&IntOrString::Int(p.port))) == Some(grpc_port)
        })
    }) {
        let port = s
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .map(|p| p.port)
            .next()
            .unwrap_or_default();
        let url = format!("{}.{ns}.svc:{port}", s.metadata.name.as_deref().unwrap_or_default());
        if !readme.contains(&url) {
            problem(format!(
                "{DEPLOY_GUIDE} does not give agents the gRPC Service's address {url}"
            ));
        }
    }

    // --- PodDisruptionBudget -----------------------------------------------------------------
    let pdb = one(&r.budgets, "PodDisruptionBudgets")?;
    let pdb_spec = pdb.spec.as_ref().context("PodDisruptionBudget without spec")?;
    if !pdb_spec.selector.as_ref().is_some_and(|s| matches(s, &pod_labels)) {
        problem("the PodDisruptionBudget does not select conductor's pods".into());
    }
    let ok = match (&pdb_spec.max_unavailable, &pdb_spec.min_available) {
        (Some(IntOrString::Int(n)), None) => (1..replicas).contains(n),
        (None, Some(IntOrString::Int(n))) => (1..replicas).contains(n),
        _ => false,
    };
    if !ok {
        problem(format!(
            "the PodDisruptionBudget ({:?} unavailable, {:?} available) must keep at least one of {replicas} replicas and let one go",
            pdb_spec.max_unavailable, pdb_spec.min_available
        ));
    }

    // --- ServiceAccount and RBAC -------------------------------------------------------------
    let sa = one(&r.service_accounts, "ServiceAccounts")?;
    let sa_name = sa.metadata.name.clone().unwrap_or_default();
    if pod.service_account_name.as_deref() != Some(sa_name.as_str()) {
        problem(format!(
            "the pod runs as ServiceAccount {:?}, not the rendered {sa_name:?}",
            pod.service_account_name
        ));
    }
    if config.kubernetes.kubeconfig.is_none()
        && (pod.automount_service_account_token == Some(false)
            || (pod.automount_service_account_token.is_none() && sa.automount_service_account_token == Some(false)))
    {
        problem("[kubernetes] uses the pod's service account, but its token is not mounted".into());
    }
    let role_names: BTreeSet<String> = r.roles.iter().filter_map(|x| x.metadata.name.clone()).collect();
    let mut bound = BTreeSet::new();
    for b in &r.bindings {
        let name = b.metadata.name.clone().unwrap_or_default();
        let rr = &b.role_ref;
        if rr.kind != "ClusterRole"
            || rr.api_group.as_deref() != Some("rbac.authorization.k8s.io")
            || !role_names.contains(&rr.name)
        {
            problem(format!(
                "ClusterRoleBinding {name} refers to {} {}, which is not rendered",
                rr.kind, rr.name
            ));
        }
        let subjects = b.subjects.as_deref().unwrap_or_default();
        let only_sa = matches!(subjects, [s] if s.kind == "ServiceAccount" && s.name == sa_name && s.namespace.as_deref() == Some(ns.as_str()));
        if !only_sa {
            problem(format!(
                "ClusterRoleBinding {name} binds {subjects:?}: want exactly ServiceAccount {ns}/{sa_name}"
            ));
        }
        bound.insert(rr.name.clone());
    }
    let needed = needs(&config);
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    for role in &r.roles {
        let name = role.metadata.name.clone().unwrap_or_default();
        if !bound.contains(&name) {
            problem(format!("ClusterRole {name} is bound to no one"));
        }
        let holder = role
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RBAC_FOR))
            .cloned()
            .unwrap_or_default();
        let Some((holder, need)) = needed.get_key_value(&holder) else {
            problem(format!(
                "ClusterRole {name} is for {holder:?} ({RBAC_FOR}), which conductor.toml does not configure"
            ));
            continue;
        };
        if !covered.insert(holder) {
            problem(format!("a second ClusterRole for {holder}: {name}"));
        }
        let mut granted = BTreeSet::new();
        for rule in role.rules.iter().flatten() {
            if rule.resource_names.as_ref().is_some_and(|n| !n.is_empty())
                || rule.non_resource_urls.as_ref().is_some_and(|n| !n.is_empty())
            {
                problem(format!(
                    "ClusterRole {name}: a rule with resourceNames or nonResourceURLs"
                ));
            }
            for g in rule.api_groups.iter().flatten() {
                for res in rule.resources.iter().flatten() {
                    for v in &rule.verbs {
                        if [g, res, v].iter().any(|x| x.contains('*')) {
                            problem(format!("ClusterRole {name}: wildcard in {g:?} {res:?} {v:?}"));
                        }
                        granted.insert((g.clone(), res.clone(), v.clone()));
                    }
                }
            }
        }
        for (g, res, v) in need.difference(&granted) {
            problem(format!(
                "ClusterRole {name} lacks {v} {res} (group {g:?}), which {holder} needs"
            ));
        }
        for (g, res, v) in granted.difference(need) {
            problem(format!(
                "ClusterRole {name} grants {v} {res} (group {g:?}), which {holder} does not use"
            ));
        }
    }
    for (holder, need) in &needed {
        if !need.is_empty() && !covered.contains(holder.as_str()) {
            problem(format!("no ClusterRole grants what {holder} needs: {need:?}"));
        }
    }

    // --- conductor check-config, with the plugins scripts/build-plugins.sh built -------------
    if check_config {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("conductor.toml");
        std::fs::write(&file, text)?;
        let dist = repo().join("plugins/dist");
        let out = Command::new(conductor_bin())
            .arg("check-config")
            .arg("--plugin-folder")
            .arg(&dist)
            .arg(&file)
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            problem(format!(
                "conductor check-config --plugin-folder {} fails: {}{}",
                dist.display(),
                stdout,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for name in config.plugins.keys() {
            if !stdout.contains(&format!("plugin {name}: ")) {
                problem(format!("check-config does not describe plugin {name}: {stdout}"));
            }
        }
    }
    Ok(())
}

fn assert_consistent(overlay: &str) -> Rendered {
    let rendered = parse(&render(overlay)).unwrap_or_else(|e| panic!("overlay {overlay}: {e:#}"));
    let problems = problems(&rendered, true);
    assert!(problems.is_empty(), "overlay {overlay}:\n  {}", problems.join("\n  "));
    rendered
}

fn plugins_of(r: &Rendered) -> BTreeSet<String> {
    let text = r.config_maps[0].data.as_ref().expect("data")["conductor.toml"].clone();
    Config::parse(&text).expect("parses").plugins.keys().cloned().collect()
}

#[test]
fn the_kube_overlay_is_consistent() {
    let r = assert_consistent("kube");
    assert_eq!(plugins_of(&r), BTreeSet::from(["kube".to_owned()]));
}

#[test]
fn the_kube_maestro_overlay_is_consistent() {
    let r = assert_consistent("kube-maestro");
    assert_eq!(
        plugins_of(&r),
        BTreeSet::from(["kube", "maestro", "consumer-controller"].map(str::to_owned))
    );
    let pod = r.deployments[0].spec.template.spec.as_ref().expect("pod");
    let secrets: BTreeSet<&str> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.as_deref())
        .collect();
    assert!(secrets.contains("conductor-maestro-db"), "{secrets:?}");
}

#[test]
fn every_overlay_is_tested() {
    let found: BTreeSet<String> = std::fs::read_dir(repo().join("deploy/overlays"))
        .expect("deploy/overlays")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let mut expected = BTreeSet::from(OVERLAYS.map(str::to_owned));
    // Not a kustomization: the patch of OCM's ClusterManager, tested below.
    expected.insert("ocm-grpc-server".to_owned());
    assert_eq!(found, expected);
}

/// The drop-in's one change to a hub: the ClusterManager's gRPC server image, and nothing else
/// (tests/dropin.rs runs the image as the operator then runs it).
#[test]
fn replacing_ocms_grpc_server_changes_only_the_image() {
    let text = std::fs::read_to_string(repo().join("deploy/overlays/ocm-grpc-server/clustermanager-patch.yaml"))
        .expect("the ClusterManager patch");
    let patch: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
    let image = patch["spec"]["serverConfiguration"]["imagePullSpec"]
        .as_str()
        .expect("spec.serverConfiguration.imagePullSpec");
    assert!(image.contains("conductor"), "{image}");
    assert_eq!(
        patch,
        serde_json::json!({"spec": {"serverConfiguration": {"imagePullSpec": image}}}),
        "nothing but the image"
    );
}

/// The checks above find what they are for: each breakage of a consistent rendering is named.
#[test]
fn the_checks_catch_broken_manifests() {
    let yaml = render("kube-maestro");
    let good = parse(&yaml).expect("parses");
    assert_eq!(problems(&good, false), Vec::<String>::new());

    // A misspelt field is no field of its type.
    let err = parse(&yaml.replacen("readinessProbe:", "readinesProbe:", 1)).expect_err("a typo");
    assert!(format!("{err:#}").contains("readinesProbe"), "{err:#}");

    fn pod(r: &mut Rendered) -> &mut PodSpec {
        r.deployments[0].spec.template.spec.as_mut().expect("pod")
    }
    fn role<'a>(r: &'a mut Rendered, name: &str) -> &'a mut ClusterRole {
        r.roles
            .iter_mut()
            .find(|x| x.metadata.name.as_deref() == Some(name))
            .expect("role")
    }
    fn config(r: &mut Rendered, from: &str, to: &str) {
        let text = r.config_maps[0]
            .data
            .as_mut()
            .expect("data")
            .get_mut("conductor.toml")
            .expect("key");
        assert!(text.contains(from), "{from}");
        *text = text.replace(from, to);
    }
    type Break = fn(&mut Rendered);
    let breaks: Vec<(&str, Break, &str)> = vec![
        (
            "a verb a grant needs is missing",
            |r| {
                let rule = &mut role(r, "open-cluster-management:conductor:kube-source")
                    .rules
                    .as_mut()
                    .expect("rules")[0];
                rule.verbs.retain(|v| v != "list");
            },
            "lacks list manifestworks",
        ),
        (
            "a verb no grant uses",
            |r| {
                let rules = role(r, "open-cluster-management:conductor:kube-source")
                    .rules
                    .as_mut()
                    .expect("rules");
                rules[0].verbs.push("delete".into());
            },
            "grants delete manifestworks",
        ),
        (
            "the auth layer's role is gone",
            |r| {
                r.roles
                    .retain(|x| x.metadata.name.as_deref() != Some("open-cluster-management:conductor:auth"))
            },
            "no ClusterRole grants what auth needs",
        ),
        (
            "a grant changes in the configuration but not in RBAC",
            |r| {
                config(
                    r,
                    "verbs = [\"watch\", \"list\", \"get\", \"patch\"]",
                    "verbs = [\"watch\", \"list\", \"get\", \"patch\", \"delete\"]",
                )
            },
            "lacks delete manifestworks",
        ),
        (
            "a binding to someone else",
            |r| r.bindings[0].subjects.as_mut().expect("subjects")[0].name = "default".into(),
            "want exactly ServiceAccount",
        ),
        (
            "the readiness probe asks the wrong path",
            |r| {
                let c = &mut pod(r).containers[0];
                c.readiness_probe
                    .as_mut()
                    .and_then(|p| p.http_get.as_mut())
                    .expect("probe")
                    .path = Some("/ready".into());
            },
            "readiness probe asks",
        ),
        (
            "the admin endpoint moves but the probes do not",
            |r| config(r, "listen = \"0.0.0.0:9090\"", "listen = \"0.0.0.0:9191\""),
            "liveness probe asks",
        ),
        (
            "the gRPC listener binds loopback",
            |r| config(r, "listen = \"0.0.0.0:8090\"", "listen = \"127.0.0.1:8090\""),
            "server.listen = 127.0.0.1:8090",
        ),
        (
            "a Service targets a port the container does not declare",
            |r| {
                let spec = r.services[0].spec.as_mut().expect("spec");
                spec.ports.as_mut().expect("ports")[0].target_port = Some(IntOrString::Int(8091));
            },
            "which the container does not declare",
        ),
        (
            "a Secret key renamed",
            |r| {
                let v = pod(r).volumes.as_mut().expect("volumes");
                let secret = v
                    .iter_mut()
                    .find_map(|v| {
                        v.secret
                            .as_mut()
                            .filter(|s| s.secret_name.as_deref() == Some("conductor-serving-cert"))
                    })
                    .expect("serving cert");
                secret.items.as_mut().expect("items")[0].path = "cert.pem".into();
            },
            "provides no tls.crt",
        ),
        (
            "the database URL written into the ConfigMap",
            |r| {
                config(
                    r,
                    "url_file = \"/var/run/secrets/conductor/maestro-db/url\"",
                    "url = \"postgres://maestro:secret@db/maestro\"",
                )
            },
            "databases.maestro.url is written in the ConfigMap",
        ),
        (
            "the ConfigMap mounted elsewhere",
            |r| {
                let mounts = pod(r).containers[0].volume_mounts.as_mut().expect("mounts");
                mounts
                    .iter_mut()
                    .find(|m| m.name == "config")
                    .expect("config mount")
                    .mount_path = "/etc/other".into();
            },
            "nothing is mounted at /etc/conductor/conductor.toml",
        ),
        (
            "capabilities kept",
            |r| {
                let sc = pod(r).containers[0]
                    .security_context
                    .as_mut()
                    .expect("security context");
                sc.capabilities = None;
            },
            "ALL is not dropped",
        ),
        (
            "the admin endpoint left open",
            |r| {
                config(
                    r,
                    "authorization = \"sar\"\n\n[admin.tls]",
                    "authorization = \"none\"\n\n[admin.tls]",
                )
            },
            "the admin endpoint is open to anyone",
        ),
        (
            "the probes ask over HTTP while the admin endpoint serves HTTPS",
            |r| {
                let c = &mut pod(r).containers[0];
                c.liveness_probe
                    .as_mut()
                    .and_then(|p| p.http_get.as_mut())
                    .expect("probe")
                    .scheme = None;
            },
            "liveness probe asks",
        ),
        (
            "one replica",
            |r| r.deployments[0].spec.replicas = Some(1),
            "want several",
        ),
        (
            "a PodDisruptionBudget that selects nothing",
            |r| {
                let sel = r.budgets[0]
                    .spec
                    .as_mut()
                    .and_then(|s| s.selector.as_mut())
                    .expect("selector");
                sel.match_labels = Some(BTreeMap::from([("app".into(), "other".into())]));
            },
            "PodDisruptionBudget does not select",
        ),
    ];
    for (what, break_it, expected) in breaks {
        let mut broken = good.clone();
        break_it(&mut broken);
        let found = problems(&broken, false);
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{what}: expected a problem containing {expected:?}, got {found:?}"
        );
    }
}

/// `to` as a path relative to the folder `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out: PathBuf = from[common..].iter().map(|_| "..").collect();
    out.extend(&to[common..]);
    out
}

/// Every object of a rendered kustomization, as JSON, by (kind, name).
fn objects(yaml: &str) -> BTreeMap<(String, String), Value> {
    let objects: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("rendered YAML");
    objects
        .into_iter()
        .map(|o| {
            let key = (
                o["kind"].as_str().unwrap_or_default().to_owned(),
                o["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            );
            (key, o)
        })
        .collect()
}

/// Rendered objects by (kind, name).
type Objects = BTreeMap<(String, String), Value>;

/// The conductor.toml of rendered objects (the ConfigMap conductor-config), parsed.
fn configuration(objects: &Objects) -> Config {
    let text = objects
        .iter()
        .find(|((kind, name), _)| kind == "ConfigMap" && name.starts_with("conductor-config"))
        .and_then(|(_, cm)| cm["data"]["conductor.toml"].as_str())
        .expect("the configuration");
    Config::parse(text).expect("the configuration parses")
}

/// `overlay` rendered as an operator's own overlay adds `component` (`resources: [<overlay>]`,
/// `components: [<component>]`), and rendered alone: (with, without).
fn render_with_component(overlay: &str, component: &Path) -> (Objects, Objects) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let overlay_dir = repo().join("deploy/overlays").join(overlay);
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\ncomponents:\n  - {}\n",
            relative(dir.path(), &overlay_dir).display(),
            relative(dir.path(), component).display()
        ),
    )
    .expect("the kustomization is written");
    let with = objects(&kustomize(dir.path()));
    let without = objects(&render(overlay));
    // The overlay's objects are untouched.
    for (key, object) in &without {
        assert_eq!(
            with.get(key),
            Some(object),
            "{overlay}: {key:?} changed by {}",
            component.display()
        );
    }
    (with, without)
}

/// The optional component `deploy/components/source-plugins` added to each overlay: it adds the
/// SourcePlugin CRD the tests load (tests/source_plugins.rs), conductor's right to watch them and
/// write their status — bound to the Deployment's ServiceAccount — and the editor role; the
/// overlay's configuration serves them, and each replica is named by its pod.
#[test]
fn the_overlays_render_with_the_source_plugins_component() {
    let component = repo().join("deploy/components/source-plugins");
    for overlay in OVERLAYS {
        let (with, without) = render_with_component(overlay, &component);
        let added: BTreeSet<(&str, &str)> = with
            .keys()
            .filter(|k| !without.contains_key(*k))
            .map(|(kind, name)| (kind.as_str(), name.as_str()))
            .collect();
        let (watcher, editor) = (
            "open-cluster-management:conductor:source-plugins",
            "open-cluster-management:conductor:source-plugin-editor",
        );
        assert_eq!(
            added,
            BTreeSet::from([
                (
                    "CustomResourceDefinition",
                    "sourceplugins.conductor.open-cluster-management.io"
                ),
                ("ClusterRole", watcher),
                ("ClusterRoleBinding", watcher),
                ("ClusterRole", editor),
            ]),
            "{overlay}"
        );
        let get = |kind: &str, name: &str| &with[&(kind.to_owned(), name.to_owned())];
        let crd = get(
            "CustomResourceDefinition",
            "sourceplugins.conductor.open-cluster-management.io",
        );
        let shipped: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(component.join("sourceplugins.crd.yaml")).expect("the CRD"),
        )
        .expect("YAML");
        assert_eq!(
            difference(&crd["spec"], &shipped["spec"], "spec"),
            None,
            "{overlay}: the CRD is the file"
        );
        assert_eq!(crd["spec"]["group"], conductor::source_plugins::GROUP, "{overlay}");
        assert_eq!(
            crd["spec"]["names"]["plural"],
            conductor::source_plugins::PLURAL,
            "{overlay}"
        );
        assert_eq!(
            crd["spec"]["versions"][0]["name"],
            conductor::source_plugins::VERSION,
            "{overlay}"
        );

        let role: ClusterRole = typed(get("ClusterRole", watcher), "the source-plugins role").expect("typed");
        let mut granted = BTreeSet::new();
        for rule in role.rules.unwrap_or_default() {
            for resource in rule.resources.unwrap_or_default() {
                for verb in &rule.verbs {
                    granted.insert((resource.clone(), verb.clone()));
                }
            }
        }
        for (resource, verb) in [
            ("sourceplugins", "list"),
            ("sourceplugins", "watch"),
            ("sourceplugins/status", "patch"),
        ] {
            assert!(
                granted.contains(&(resource.to_owned(), verb.to_owned())),
                "{overlay}: {resource} {verb}"
            );
        }
        let binding: ClusterRoleBinding = typed(get("ClusterRoleBinding", watcher), "the binding").expect("typed");
        let deployment: Deployment = typed(get("Deployment", "conductor"), "the Deployment").expect("typed");
        let pod = deployment.spec.template.spec.expect("a pod spec");
        let subject = &binding.subjects.unwrap_or_default()[0];
        assert_eq!(
            (Some(subject.name.as_str()), subject.namespace.as_deref()),
            (
                pod.service_account_name.as_deref(),
                deployment.metadata.namespace.as_deref()
            ),
            "{overlay}: bound to conductor's ServiceAccount"
        );
        let container = pod
            .containers
            .iter()
            .find(|c| c.name == CONTAINER)
            .expect("the container");
        let pod_name = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "POD_NAME")
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(
            pod_name,
            Some("metadata.name"),
            "{overlay}: each replica reports under its pod's name"
        );
        let config = configuration(&with);
        assert!(config.dynamic.source_plugins, "{overlay}: [dynamic] source_plugins");
        assert!(
            config.oci.cache.is_some(),
            "{overlay}: pulled plugins are kept in the pod's cache volume"
        );
    }
}

/// The optional component `deploy/observability` added to each overlay, as an operator's own
/// overlay adds it (`resources: [<overlay>]`, `components: [<deploy/observability>]`): it renders,
/// leaves the overlay's objects as they were, and adds the PrometheusRule holding exactly
/// rules.yml's groups, the ServiceMonitor scraping the Service conductor-metrics the way the
/// overlay's admin endpoint is served (HTTPS with the serving certificate's CA and name, a bearer
/// token), the ConfigMap Grafana's sidecar loads the dashboard from, and the RBAC that lets
/// Prometheus `get /metrics`.
#[test]
fn the_overlays_render_with_the_observability_component() {
    let observability = repo().join("deploy/observability");
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(observability.join("rules.yml")).expect("rules.yml"))
            .expect("rules.yml is YAML");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(observability.join("grafana-dashboard.json")).expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    for overlay in OVERLAYS {
        let (with, without) = render_with_component(overlay, &observability);

        // The overlay's objects are untouched; exactly the component's are added.
        for (key, object) in &without {
            assert_eq!(with.get(key), Some(object), "{overlay}: {key:?} changed");
        }
        let added: BTreeSet<(&str, &str)> = with
            .keys()
            .filter(|k| !without.contains_key(*k))
            .map(|(kind, name)| (kind.as_str(), name.as_str()))
            .collect();
        let metrics_reader = "open-cluster-management:conductor:metrics-reader";
        assert_eq!(
            added,
            BTreeSet::from([
                ("PrometheusRule", "conductor"),
                ("ServiceMonitor", "conductor"),
                ("ConfigMap", "conductor-grafana-dashboard"),
                ("ClusterRole", metrics_reader),
                ("ClusterRoleBinding", metrics_reader),
            ]),
            "{overlay}"
        );
        let get = |kind: &str, name: &str| &with[&(kind.to_owned(), name.to_owned())];
        let namespace = "open-cluster-management-hub";

        // The PrometheusRule: rules.yml's groups, in the overlay's namespace.
        let rule = get("PrometheusRule", "conductor");
        assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1", "{overlay}");
        assert_eq!(rule["metadata"]["namespace"], namespace, "{overlay}");
        assert!(rules["groups"].as_array().is_some_and(|g| !g.is_empty()), "{rules}");
        assert_eq!(
            rule["spec"]["groups"], rules["groups"],
            "{overlay}: prometheus-rules.yaml is not rules.yml (python3 deploy/observability/prometheus_rules.py regenerates it)"
        );

        // The ServiceMonitor: selects the Service conductor-metrics (and no other Service with a
        // port of that name), as the admin endpoint of the overlay's configuration is served.
        let monitor = get("ServiceMonitor", "conductor");
        assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1", "{overlay}");
        assert_eq!(monitor["metadata"]["namespace"], namespace, "{overlay}");
        let selector: LabelSelector =
            serde_json::from_value(monitor["spec"]["selector"].clone()).expect("a label selector");
        let endpoints = monitor["spec"]["endpoints"].as_array().expect("endpoints");
        assert_eq!(endpoints.len(), 1, "{overlay}: {endpoints:?}");
        let endpoint = &endpoints[0];
        let port = endpoint["port"].as_str().expect("a port name");
        assert_eq!(port, "metrics", "{overlay}");
        let scraped: Vec<&str> = with
            .iter()
            .filter(|((kind, _), _)| kind == "Service")
            .filter(|(_, s)| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(s["metadata"]["labels"].clone()).unwrap_or_default();
                matches(&selector, &labels)
                    && s["spec"]["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["name"] == port)
            })
            .map(|((_, name), _)| name.as_str())
            .collect();
        assert_eq!(scraped, ["conductor-metrics"], "{overlay}");
        let service = get("Service", "conductor-metrics");
        let target = service["spec"]["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["name"] == port))
            .map(|p| p["targetPort"].clone());
        assert_eq!(target, Some(Value::from("admin")), "{overlay}");
        let config = configuration(&with);
        assert_eq!(
            config.admin.authorization,
            AdminAuthorization::Sar,
            "{overlay}: the admin endpoint asks for a token"
        );
        assert!(config.admin.tls.is_some(), "{overlay}: the admin endpoint serves HTTPS");
        assert_eq!(endpoint["path"], "/metrics", "{overlay}");
        assert_eq!(endpoint["scheme"], "https", "{overlay}");
        assert!(
            endpoint["bearerTokenFile"].is_string() || endpoint["authorization"]["credentials"].is_object(),
            "{overlay}: Prometheus sends a token: {endpoint}"
        );
        let tls = &endpoint["tlsConfig"];
        assert_eq!(
            tls["serverName"],
            format!("conductor.{namespace}.svc"),
            "{overlay}: the name in the serving certificate"
        );
        assert_eq!(
            tls["ca"]["secret"],
            serde_json::json!({"name": "conductor-serving-ca", "key": "ca.crt"}),
            "{overlay}"
        );
        assert!(
            tls["insecureSkipVerify"].is_null() || tls["insecureSkipVerify"] == false,
            "{overlay}: never a token to an unverified server"
        );

        // The dashboard, for Grafana's sidecar.
        let dashboard_map: ConfigMap = typed(
            get("ConfigMap", "conductor-grafana-dashboard"),
            "the dashboard ConfigMap",
        )
        .expect("a ConfigMap");
        assert_eq!(
            dashboard_map.metadata.namespace.as_deref(),
            Some(namespace),
            "{overlay}"
        );
        assert_eq!(
            dashboard_map
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("grafana_dashboard"))
                .map(String::as_str),
            Some("1"),
            "{overlay}"
        );
        let data = dashboard_map.data.expect("data");
        assert_eq!(data.len(), 1, "{overlay}: {:?}", data.keys());
        let (file, json) = data.iter().next().expect("one file");
        assert!(file.ends_with(".json"), "{overlay}: {file}");
        assert_eq!(
            serde_json::from_str::<Value>(json).expect("JSON"),
            dashboard,
            "{overlay}: the ConfigMap holds grafana-dashboard.json"
        );

        // `get /metrics` for Prometheus.
        let role: ClusterRole = typed(get("ClusterRole", metrics_reader), "the metrics-reader role").expect("typed");
        let rules_of_role = role.rules.unwrap_or_default();
        assert_eq!(rules_of_role.len(), 1, "{overlay}: {rules_of_role:?}");
        assert_eq!(
            (
                rules_of_role[0].non_resource_urls.clone(),
                rules_of_role[0].verbs.clone()
            ),
            (Some(vec!["/metrics".to_owned()]), vec!["get".to_owned()]),
            "{overlay}"
        );
        assert!(rules_of_role[0].resources.is_none(), "{overlay}");
        let binding: ClusterRoleBinding =
            typed(get("ClusterRoleBinding", metrics_reader), "the metrics-reader binding").expect("typed");
        assert_eq!(
            (binding.role_ref.kind.as_str(), binding.role_ref.name.as_str()),
            ("ClusterRole", metrics_reader),
            "{overlay}"
        );
        let subjects = binding.subjects.unwrap_or_default();
        assert!(
            !subjects.is_empty()
                && subjects
                    .iter()
                    .all(|s| s.kind == "ServiceAccount" && s.namespace.is_some()),
            "{overlay}: Prometheus's ServiceAccount: {subjects:?}"
        );
    }
}
