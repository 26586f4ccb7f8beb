//! moto's server, serving EC2 and SSM over the real wire protocol on
//! 127.0.0.1, for tests that talk to AWS. One server per test process,
//! started on first use, shared by the tests; a test that needs IAM enforced
//! starts a server of its own ([`start_enforcing`]). It is stopped when the test process ends, however
//! it ends: a small shell guardian holds moto's process group and kills it
//! when the pipe from this process closes.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nodewright::aws::clients::{AwsClients, AwsSettings, eks_client, sdk_config};

/// A running moto server.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Held open for the life of the process; the guardian stops moto at EOF.
    _stdin: Mutex<ChildStdin>,
    _guardian: Mutex<Child>,
}

/// The process's moto server, started on first use.
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(start)
}

/// SDK clients pointed at moto, with fixed test credentials.
pub async fn moto_clients() -> AwsClients {
    clients_as(&moto().endpoint, "testing", "testing").await
}

/// An IAM role in moto that EC2 instances may assume (a node role).
pub async fn create_role(clients: &AwsClients, name: &str) {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    clients
        .iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .send()
        .await
        .unwrap();
}

/// Whether moto holds an instance profile named `name`.
pub async fn profile_exists(clients: &AwsClients, name: &str) -> bool {
    clients
        .iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
        .is_ok()
}

fn moto_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NODEWRIGHT_MOTO_SERVER") {
        return PathBuf::from(path);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/moto/bin/moto_server")
}

/// A moto server of its own that enforces IAM (moto's
/// `INITIAL_NO_AUTH_ACTION_COUNT`): the first `free_calls` calls are not
/// checked, so a test can set up users and resources as an administrator
/// would; [`Moto::enforce_now`] ends that window early. Stopped when dropped.
pub fn start_enforcing(free_calls: u32) -> Moto {
    spawn(&[("INITIAL_NO_AUTH_ACTION_COUNT", free_calls.to_string())])
}

impl Moto {
    /// From now on every call is checked against the caller's IAM policies
    /// (moto's `/moto-api/reset-auth` with 0 free calls left).
    pub fn enforce_now(&self) {
        let address = self.endpoint.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).expect("connect to moto");
        write!(
            stream,
            "POST /moto-api/reset-auth HTTP/1.1\r\nHost: {address}\r\nContent-Type: text/plain\r\nContent-Length: 1\r\nConnection: close\r\n\r\n0"
        )
        .expect("ask moto to enforce IAM");
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut stream, &mut answer).expect("moto's answer");
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "moto refused to enforce IAM: {answer}"
        );
    }
}

/// SDK clients pointed at `endpoint`, signing as access key `key`.
pub async fn clients_as(endpoint: &str, key: &str, secret: &str) -> AwsClients {
    AwsClients::new(&config_as(endpoint, key, secret).await)
}

/// The SDK configuration for moto at `endpoint` in us-east-1, signing as
/// access key `key`.
async fn config_as(endpoint: &str, key: &str, secret: &str) -> aws_config::SdkConfig {
    let settings = AwsSettings {
        region: Some("us-east-1".to_string()),
        endpoint_url: Some(endpoint.to_string()),
        credentials: Some(aws_sdk_ec2::config::Credentials::new(
            key, secret, None, None, "moto",
        )),
    };
    sdk_config(&settings).await
}

/// An EKS client pointed at `endpoint`, signing as access key `key`.
pub async fn eks_as(endpoint: &str, key: &str, secret: &str) -> aws_sdk_eks::Client {
    eks_client(&config_as(endpoint, key, secret).await)
}

fn start() -> Moto {
    spawn(&[])
}

/// Starts moto with `env` added to its environment.
fn spawn(env: &[(&str, String)]) -> Moto {
    assert_eq!(
        std::env::var("AWS_EC2_METADATA_DISABLED").as_deref(),
        Ok("true"),
        "set AWS_EC2_METADATA_DISABLED=true (scripts/test does) so the SDK never probes instance metadata"
    );
    let binary = moto_binary();
    assert!(
        binary.exists(),
        "moto_server not found at {}: run scripts/test, which installs moto into .venv/moto, or set NODEWRIGHT_MOTO_SERVER",
        binary.display()
    );
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free local port");
        listener.local_addr().expect("local address").port()
    };
    // `setsid` makes the shell the leader of a new process group holding
    // moto (which runs as more than one process); at EOF on stdin the shell
    // kills that whole group, itself included.
    let mut guardian = Command::new("setsid")
        .args([
            "sh",
            "-c",
            r#""$0" -H 127.0.0.1 -p "$1" >/dev/null 2>&1 & cat >/dev/null; kill -TERM -$$"#,
        ])
        .arg(&binary)
        .arg(port.to_string())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start moto_server through setsid");
    let mut stdin = guardian.stdin.take().expect("guardian stdin");
    let _ = stdin.flush();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto_server did not listen on 127.0.0.1:{port} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Moto {
        endpoint: format!("http://127.0.0.1:{port}"),
        _stdin: Mutex::new(stdin),
        _guardian: Mutex::new(guardian),
    }
}
