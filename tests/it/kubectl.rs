//! The API server double (a test double, and the engine of `nodewright
//! sandbox`) served on 127.0.0.1 and driven by the machine's `kubectl`
//! through a kubeconfig, as a user drives a sandbox.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver_double::ApiServer;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nodewright::apis::NodePool;
use serde_json::json;

/// A served double with a kubeconfig; stops serving and removes its files when dropped.
struct Served {
    server: ApiServer,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.serving.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Served {
    async fn start() -> Self {
        let server = nodewright::sim::double::server();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let serving = tokio::spawn(server.clone().serve(listener));
        let dir =
            std::env::temp_dir().join(format!("nodewright-kubectl-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: double, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
                 users: [{{name: double, user: {{}}}}]\ncontexts: [{{name: double, context: {{cluster: double, user: double}}}}]\n\
                 current-context: double\n"
            ),
        )
        .unwrap();
        Served {
            server,
            serving,
            dir,
        }
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    async fn try_kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let kubeconfig = self.dir.join("kubeconfig");
        let cache = self.dir.join("cache");
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let output = tokio::task::spawn_blocking(move || {
            crate::support::kubectl()
                .args(&args)
                .arg(format!("--cache-dir={}", cache.display()))
                .arg("--request-timeout=30s")
                .env("KUBECONFIG", &kubeconfig)
                .current_dir(root)
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (
            output.status.success(),
            text(&output.stdout),
            text(&output.stderr),
        )
    }

    /// Runs kubectl, which must succeed; returns its output.
    async fn kubectl(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.try_kubectl(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{stderr}\n{stdout}");
        stdout
    }
}

fn example(path: &str) -> String {
    Path::new("examples/quickstart")
        .join(path)
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_manages_a_cluster_on_the_double() {
    let served = Served::start().await;
    let client = served.server.client();

    // apply: CRD objects (validated on the server) and a Deployment in a
    // namespace created with a protobuf body.
    let applied = served
        .kubectl(&[
            "apply",
            "-f",
            &example("nodepool.yaml"),
            "-f",
            &example("ec2nodeclass.yaml"),
        ])
        .await;
    assert!(
        applied.contains("nodepool.karpenter.sh/general-purpose created"),
        "{applied}"
    );
    assert!(
        applied.contains("ec2nodeclass.karpenter.k8s.aws/default created"),
        "{applied}"
    );
    served.kubectl(&["create", "namespace", "shop"]).await;
    served.kubectl(&["apply", "-f", &example("web.yaml")]).await;
    let again = served.kubectl(&["apply", "-f", &example("web.yaml")]).await;
    assert!(again.contains("deployment.apps/web unchanged"), "{again}");

    // A Node the way a kubelet registers one.
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {
            "kubeletVersion": "v1.34.0", "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
            "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
            "osImage": "", "systemUUID": ""}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    let listed = served
        .kubectl(&["get", "nodes,nodeclaims,pods", "-A"])
        .await;
    assert!(
        listed.contains("node/node-a") && listed.contains("Ready"),
        "{listed}"
    );
    assert_eq!(listed.matches("pod/web-").count(), 8, "{listed}");
    assert!(
        listed.contains("NAMESPACE") && listed.contains("shop"),
        "{listed}"
    );

    let wide = served.kubectl(&["get", "nodepools", "-o", "wide"]).await;
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "NODECLASS",
            "NODES",
            "READY",
            "AGE",
            "WEIGHT",
            "CPU",
            "MEMORY"
        ],
        "{wide}"
    );
    assert!(
        wide.lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("general-purpose"),
        "{wide}"
    );

    // wait: on what the double's controllers complete.
    let waited = served
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.replicas}=8",
            "deployment/web",
            "-n",
            "shop",
            "--timeout=30s",
        ])
        .await;
    assert!(waited.contains("condition met"), "{waited}");
    served
        .kubectl(&[
            "wait",
            "--for=condition=Progressing",
            "deployment/web",
            "-n",
            "shop",
            "--timeout=30s",
        ])
        .await;

    let scaled = served
        .kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=3"])
        .await;
    assert!(scaled.contains("deployment.apps/web scaled"), "{scaled}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    let described = served
        .kubectl(&["describe", "deployment", "web", "-n", "shop"])
        .await;
    assert!(
        described.contains("NewReplicaSet:") && described.contains("3/3 replicas created"),
        "{described}"
    );
    assert!(
        described.contains("ScalingReplicaSet") && described.contains("from 8 to 3"),
        "{described}"
    );

    served.kubectl(&["cordon", "node-a"]).await;
    assert_eq!(
        nodes
            .get("node-a")
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true)
    );
    assert!(
        served
            .kubectl(&["get", "node", "node-a"])
            .await
            .contains("Ready,SchedulingDisabled")
    );
    let drained = served
        .kubectl(&["drain", "node-a", "--ignore-daemonsets", "--timeout=30s"])
        .await;
    assert!(drained.contains("node/node-a drained"), "{drained}");
    served.kubectl(&["uncordon", "node-a"]).await;
    assert_ne!(
        nodes
            .get("node-a")
            .await
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true)
    );

    served
        .kubectl(&["label", "nodepool", "general-purpose", "team=infra"])
        .await;
    served
        .kubectl(&[
            "patch",
            "nodepool",
            "general-purpose",
            "--type=merge",
            "-p",
            r#"{"spec":{"weight":10}}"#,
        ])
        .await;
    let pools: Api<NodePool> = Api::all(client.clone());
    let pool = pools.get("general-purpose").await.unwrap();
    assert_eq!(pool.metadata.labels.unwrap()["team"], "infra");
    assert_eq!(pool.spec.weight, Some(10));
    let (ok, _, refused) = served
        .try_kubectl(&[
            "patch",
            "nodepool",
            "general-purpose",
            "--type=merge",
            "-p",
            r#"{"spec":{"weight":1000}}"#,
        ])
        .await;
    assert!(!ok && refused.contains("spec.weight"), "{refused}");

    let server_side = served
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &example("ec2nodeclass.yaml"),
        ])
        .await;
    assert!(server_side.contains("serverside-applied"), "{server_side}");
    served
        .kubectl(&[
            "create",
            "deployment",
            "kept",
            "-n",
            "shop",
            "--image=kept:1",
        ])
        .await;
    served
        .kubectl(&[
            "delete",
            "deployment",
            "kept",
            "-n",
            "shop",
            "--cascade=orphan",
        ])
        .await;
    let kept = served
        .kubectl(&[
            "get",
            "replicasets",
            "-n",
            "shop",
            "-l",
            "app=kept",
            "--no-headers",
        ])
        .await;
    assert_eq!(kept.lines().count(), 1, "{kept}");

    let deleted = served
        .kubectl(&["delete", "deployment", "web", "-n", "shop"])
        .await;
    assert!(
        deleted.contains("deployment.apps \"web\" deleted"),
        "{deleted}"
    );
    let left = pods.list(&ListParams::default()).await.unwrap().items;
    assert!(
        left.iter()
            .all(|p| p.metadata.labels.as_ref().unwrap()["app"] == "kept"),
        "{left:?}"
    );
    served
        .kubectl(&["delete", "nodepool", "general-purpose"])
        .await;
    assert!(
        pools
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // A status write from "a kubelet" is seen by kubectl at once.
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    nodes
        .patch_status("node-a", &PatchParams::default(), &Patch::Merge(&not_ready))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(served.kubectl(&["get", "nodes"]).await.contains("NotReady"));
}
