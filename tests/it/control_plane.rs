//! A real Kubernetes control plane for tests: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler of the versions pinned in
//! `tests/control-plane/go.mod`, started by `scripts/control-plane start`
//! on 127.0.0.1 with its state in a directory of its own, and stopped by
//! `scripts/control-plane stop` — when the [`ControlPlane`] is dropped
//! (also when the test panics) and, whatever happens to the test process,
//! by a small guardian shell that stops it when the pipe from this process
//! closes (as `moto.rs` stops moto).
//!
//! A test that cannot have its control plane fails: the binaries are built
//! on first use (scripts/test builds them before `cargo test`), and a build
//! or start that fails panics with what the script said.
//!
//! [`shared`] is one control plane per test process for tests that keep to
//! namespaces and objects of their own; a scenario that runs nodewright's
//! controllers — which act on every NodePool, NodeClaim and Node of the
//! cluster — starts one of its own with [`ControlPlane::start`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// A running control plane.
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    /// Held open for the life of the control plane; the guardian runs
    /// `scripts/control-plane stop` at EOF.
    guardian_stdin: Mutex<Option<ChildStdin>>,
    guardian: Mutex<Child>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/control-plane")
}

/// The process's shared control plane, started on first use and stopped
/// when the process ends. Tests on it keep to namespaces and objects of
/// their own. A static is never dropped, so its guardian also removes its
/// directory once it has stopped it.
pub fn shared() -> &'static ControlPlane {
    static SHARED: OnceLock<ControlPlane> = OnceLock::new();
    SHARED.get_or_init(|| ControlPlane::start_with("shared", AtExit::Remove))
}

/// What the guardian does with the directory when the test process ends.
#[derive(Clone, Copy)]
enum AtExit {
    /// Leave it: `Drop` removes it, or keeps its logs after a panic.
    Keep,
    /// Remove it after stopping the control plane (nothing drops it).
    Remove,
}

impl ControlPlane {
    /// Starts a control plane of its own for the test `name`; panics (the
    /// test fails) with the script's output when it cannot be built or
    /// started.
    pub fn start(name: &str) -> ControlPlane {
        ControlPlane::start_with(name, AtExit::Keep)
    }

    fn start_with(name: &str, at_exit: AtExit) -> ControlPlane {
        let dir = std::env::temp_dir().join(format!(
            "nodewright-cp-{name}-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        // The guardian first: if this process dies while the control plane
        // starts, the pipe closes and whatever started is stopped.
        let mut guardian = Command::new("setsid")
            .args([
                "sh",
                "-c",
                r#"cat >/dev/null; "$0" stop "$1"; if [ "$2" = remove ]; then rm -rf "$1"; fi"#,
            ])
            .arg(script())
            .arg(&dir)
            .arg(match at_exit {
                AtExit::Keep => "keep",
                AtExit::Remove => "remove",
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the control plane's guardian through setsid");
        let mut stdin = guardian.stdin.take().expect("guardian stdin");
        let _ = stdin.flush();
        let plane = ControlPlane {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            guardian_stdin: Mutex::new(Some(stdin)),
            guardian: Mutex::new(guardian),
        };
        let output = Command::new(script())
            .arg("start")
            .arg(&plane.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script().display()));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "scripts/control-plane start {} failed ({}); it said:\n{stderr}\n{stdout}",
            plane.dir.display(),
            output.status
        );
        let last = stdout.lines().last().unwrap_or_default();
        assert_eq!(
            Path::new(last),
            plane.kubeconfig,
            "scripts/control-plane start prints the kubeconfig last; it said:\n{stdout}"
        );
        plane
    }

    /// The cluster-admin kubeconfig (for kubectl and tests).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The kubeconfig for nodewright (a cluster admin of its own name, so
    /// the audit log tells its requests from kubectl's).
    pub fn nodewright_kubeconfig(&self) -> PathBuf {
        self.dir.join("nodewright.kubeconfig")
    }

    /// The API server's audit log (every request at `Metadata` level).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// The directory of its state, logs and kubeconfigs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A client as cluster admin.
    pub async fn client(&self) -> kube::Client {
        client_from(&self.kubeconfig).await
    }

    /// A client as the ServiceAccount `namespace/name` (a token from the
    /// TokenRequest API), for RBAC checks; waits up to 30 s for the
    /// account (kube-controller-manager makes each namespace's `default`).
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> kube::Client {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: kube::Api<ServiceAccount> =
            kube::Api::namespaced(self.client().await, namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let issued = loop {
            match accounts
                .create_token_request(name, &Default::default(), &request)
                .await
            {
                Ok(issued) => break issued,
                Err(e) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "a token for {namespace}/{name}: {e}"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
            }
        };
        let token = issued
            .status
            .and_then(|s| s.token)
            .expect("the TokenRequest's token");
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        };
        kube::Client::try_from(config).expect("a client for the ServiceAccount")
    }
}

/// A client from the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("the kubeconfig {}: {e}", path.display()));
    kube::Client::try_from(config).expect("a client for the control plane")
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let stopped = Command::new(script())
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output();
        // EOF: the guardian runs stop again, which finds nothing left.
        drop(self.guardian_stdin.lock().ok().and_then(|mut s| s.take()));
        if let Ok(mut guardian) = self.guardian.lock() {
            let _ = guardian.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "control plane stopped; its logs stay in {}",
                self.dir.join("logs").display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
            match stopped {
                Ok(output) => assert!(
                    output.status.success(),
                    "scripts/control-plane stop: {}",
                    String::from_utf8_lossy(&output.stderr)
                ),
                Err(e) => panic!("running scripts/control-plane stop: {e}"),
            }
        }
    }
}

/// A number no other control plane of this process has.
fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_runs_workloads_schedules_enforces_rbac_and_audits() {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube::api::{Api, ListParams, PostParams};
    use std::time::{Duration, Instant};

    let plane = ControlPlane::start("smoke");
    let client = plane.client().await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "35"),
        "the pinned Kubernetes: {version:?}"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "smoke"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    // kube-controller-manager: a Deployment gets its ReplicaSet and pods.
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "smoke"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }))
    .unwrap();
    // The namespace's default ServiceAccount, which pods need, comes from
    // kube-controller-manager too: retried until it is there.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "smoke");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "smoke");
    let deadline = Instant::now() + Duration::from_secs(60);
    // kube-scheduler: with no node, the pods are Unschedulable.
    loop {
        let listed = pods.list(&ListParams::default()).await.unwrap();
        let unschedulable = listed
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                    })
            })
            .count();
        if unschedulable == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "two pods marked Unschedulable by kube-scheduler; have {:?}",
            listed.items.iter().map(|p| &p.status).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "smoke");
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // RBAC: a ServiceAccount with no bindings is refused.
    let nobody = plane.service_account_client("smoke", "default").await;
    let refused = Api::<Pod>::namespaced(nobody, "smoke")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );

    // The audit log holds every request, with its user.
    let audit = std::fs::read_to_string(plane.audit_log()).unwrap();
    assert!(
        audit.contains(r#""username":"kubernetes-admin""#),
        "admin's requests audited"
    );
    assert!(
        audit.contains(r#""username":"system:serviceaccount:smoke:default""#),
        "the refused request audited"
    );

    let dir = plane.dir().to_path_buf();
    let pids: Vec<u32> = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .map(|name| {
        std::fs::read_to_string(dir.join(format!("{name}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    })
    .collect();
    drop(plane);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} stopped with the control plane"
        );
    }
    assert!(!dir.exists(), "its directory removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_control_plane_serves_each_test_in_its_own_namespace() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{Api, PostParams};

    let plane = tokio::task::spawn_blocking(shared).await.unwrap();
    let client = plane.client().await;
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "shared-smoke"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let map: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}, "data": {"k": "v"}}))
            .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client, "shared-smoke");
    maps.create(&PostParams::default(), &map).await.unwrap();
    assert_eq!(
        maps.get("a").await.unwrap().data.unwrap()["k"],
        "v",
        "served from etcd"
    );
}
