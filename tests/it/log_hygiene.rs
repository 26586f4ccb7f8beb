//! What the controllers log holds no credentials and no user data: the
//! `nodewright sandbox --cloud-provider aws` binary runs against moto with
//! every crate logging at debug, with an AWS secret key and session token
//! and two EC2NodeClasses' `spec.userData` that each carry a marker — one
//! launched (the user data goes to EC2 in a launch template), one
//! Bottlerocket class whose user data is not valid TOML (the launch fails
//! and the error is logged). No line of its output may hold a marker, in
//! plain text or in base64.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::moto::{moto, moto_clients};

const LABEL: &str = "log-hygiene";
const SECRET_KEY: &str = "LogHygieneSecretKey0WJALRXUTNFEMIK7MDENG";
const SESSION_TOKEN: &str = "LogHygieneSessionTokenFQoGZXIvYXdzEJr";
const USER_DATA: &str = "LogHygieneUserDataSecret7Qx2Vb";
const BROKEN_USER_DATA: &str = "LogHygieneTomlSecret9Kd4Wn";

fn manifests() -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: bottle}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: bottle}}
      taints: [{{key: dedicated, value: bottle, effect: NoSchedule}}]
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: LogHygieneNodeRole
  amiFamily: AL2023
  amiSelectorTerms: [{{tags: {{team: {LABEL}}}}}]
  subnetSelectorTerms: [{{tags: {{discovery: {LABEL}}}}}]
  securityGroupSelectorTerms: [{{tags: {{discovery: {LABEL}}}}}]
  userData: |
    #!/bin/bash
    echo {USER_DATA} | registry-login --password-stdin
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: bottle}}
spec:
  role: LogHygieneNodeRole
  amiFamily: Bottlerocket
  amiSelectorTerms: [{{tags: {{team: {LABEL}}}}}]
  subnetSelectorTerms: [{{tags: {{discovery: {LABEL}}}}}]
  securityGroupSelectorTerms: [{{tags: {{discovery: {LABEL}}}}}]
  userData: |
    [settings.kubernetes]
    bootstrap-token = {BROKEN_USER_DATA}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: bottled}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: bottled}}}}
  template:
    metadata: {{labels: {{app: bottled}}}}
    spec:
      nodeSelector: {{karpenter.sh/nodepool: bottle}}
      tolerations: [{{key: dedicated, value: bottle, effect: NoSchedule}}]
      containers:
      - name: app
        image: public.ecr.aws/nginx/nginx:1.27
        resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}
"#
    )
}

/// `secret` as it appears in base64 at each of the three alignments it
/// can have inside a longer encoded text (the characters that depend on
/// its neighbours left out).
fn base64_forms(secret: &str) -> Vec<String> {
    (0..3)
        .map(|shift| {
            let mut bytes = vec![0u8; shift];
            bytes.extend_from_slice(secret.as_bytes());
            let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let start = if shift == 0 { 0 } else { 4 };
            encoded[start..encoded.len() - 4].to_string()
        })
        .collect()
}

/// Reads a pipe to its end into `into`, line by line.
fn collect(
    pipe: impl Read + Send + 'static,
    into: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credentials_or_user_data_in_the_logs_of_a_sandbox_run_at_debug() {
    let clients = moto_clients().await;
    crate::sandbox_aws::network(&clients, LABEL, "LogHygieneNodeRole").await;
    clients
        .sqs
        .create_queue()
        .queue_name(LABEL)
        .send()
        .await
        .unwrap();

    let dir = std::env::temp_dir().join(format!("nodewright-{LABEL}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("all.yaml"), manifests()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("sandbox")
        .arg(&dir)
        .arg("--kubeconfig")
        .arg(dir.join("sandbox.kubeconfig"))
        .args(["--cloud-provider", "aws", "--cluster-name", LABEL])
        .args(["--interruption-queue", LABEL])
        .args(["--launch-delay", "0s", "--register-delay", "0s"])
        .args(["--log-format", "json"])
        .env("AWS_ENDPOINT_URL", &moto().endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIALOGHYGIENE")
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_SESSION_TOKEN", SESSION_TOKEN)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = Arc::new(Mutex::new(String::new()));
    let readers = [
        collect(child.stdout.take().unwrap(), Arc::clone(&output)),
        collect(child.stderr.take().unwrap(), Arc::clone(&output)),
    ];

    // Both paths ran: a web pod Running on a launched instance (its user
    // data sent to EC2), and the Bottlerocket class's launch refused for
    // its user data.
    let started = Instant::now();
    let ran = loop {
        let seen = {
            let text = output.lock().unwrap();
            let running = text
                .lines()
                .any(|l| l.contains("pod Running") && l.contains("default/web-"));
            (running, text.contains("not valid TOML"))
        };
        if seen == (true, true) || started.elapsed() > Duration::from_secs(150) {
            break seen;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the sandbox exited ({status}):\n{}", output.lock().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    // Stopped as Ctrl-C stops it, so its shutdown is logged too.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    for reader in readers {
        reader.join().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);

    let text = output.lock().unwrap().clone();
    assert_eq!(
        ran,
        (true, true),
        "(web pod Running, TOML error logged) not both seen in 150 s:\n{text}"
    );
    assert!(
        text.lines().count() > 50,
        "too little logged to mean anything:\n{text}"
    );
    for secret in [SECRET_KEY, SESSION_TOKEN, USER_DATA, BROKEN_USER_DATA] {
        let mut forms = base64_forms(secret);
        forms.push(secret.to_string());
        for form in forms {
            if let Some(line) = text.lines().find(|l| l.contains(&form)) {
                panic!("{secret} (as {form}) is logged:\n{line}");
            }
        }
    }
}
