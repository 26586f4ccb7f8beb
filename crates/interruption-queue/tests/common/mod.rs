//! moto's server, serving SQS over the real wire protocol on 127.0.0.1.
//!
//! One server per test process, started on first use from the binary named
//! by `NODEWRIGHT_MOTO_SERVER` (else the workspace's `.venv/moto`); without
//! one the tests fail. It is
//! stopped when the test process ends, however it ends: a small shell
//! guardian leads moto's process group and kills that group when the pipe
//! from this process closes.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_sqs::config::{ConfigBag, Credentials, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::BoxError;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

/// The variable naming the `moto_server` binary.
const MOTO_SERVER: &str = "NODEWRIGHT_MOTO_SERVER";

/// A running moto server.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Held open for the life of the process; the guardian stops moto at EOF.
    _stdin: Mutex<ChildStdin>,
    _guardian: Mutex<Child>,
}

/// The process's moto server, started on first use: `NODEWRIGHT_MOTO_SERVER`,
/// else the workspace's `.venv/moto/bin/moto_server` that `scripts/test`
/// installs. A test that needs moto and finds none fails, saying how to get
/// it; it never passes by skipping.
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let binary = std::env::var_os(MOTO_SERVER).map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/moto/bin/moto_server"),
            PathBuf::from,
        );
        start(binary)
    })
}

/// An SQS client pointed at moto with fixed test credentials, and the SQS
/// operations it sends, in order.
pub async fn client(moto: &Moto) -> (aws_sdk_sqs::Client, Calls) {
    client_at(&moto.endpoint).await
}

/// An SQS client pointed at `endpoint` with fixed test credentials, and the
/// SQS operations it sends, in order.
pub async fn client_at(endpoint: &str) -> (aws_sdk_sqs::Client, Calls) {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let config = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let calls = Calls::default();
    let config = aws_sdk_sqs::config::Builder::from(&config)
        .interceptor(calls.clone())
        .build();
    (aws_sdk_sqs::Client::from_conf(config), calls)
}

/// A queue in moto with a name unique to the test; returns the name.
pub async fn create_queue(client: &aws_sdk_sqs::Client, test: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("nodewright-{test}-{n}");
    client
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap();
    name
}

/// Visible plus in-flight messages in a queue, as moto counts them.
pub async fn messages_in(client: &aws_sdk_sqs::Client, name: &str) -> u64 {
    use aws_sdk_sqs::types::QueueAttributeName;
    let url = client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    attributes
        .values()
        .map(|count| count.parse::<u64>().unwrap())
        .sum()
}

/// The SQS operations a client sent over the wire, read from each
/// request's `X-Amz-Target` header (`AmazonSQS.ReceiveMessage`).
#[derive(Debug, Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<String>>>);

impl Calls {
    /// How many `operation` calls were sent.
    pub fn count(&self, operation: &str) -> usize {
        let calls = self.0.lock().unwrap();
        calls.iter().filter(|call| *call == operation).count()
    }

    /// Forgets the calls so far.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

impl Intercept for Calls {
    fn name(&self) -> &'static str {
        "Calls"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(target) = context.request().headers().get("x-amz-target") {
            let operation = target.strip_prefix("AmazonSQS.").unwrap_or(target);
            self.0.lock().unwrap().push(operation.to_owned());
        }
        Ok(())
    }
}

fn start(binary: PathBuf) -> Moto {
    if std::env::var("AWS_EC2_METADATA_DISABLED").as_deref() != Ok("true") {
        // SAFETY: this runs once, inside the `OnceLock` initialiser, before
        // any SDK client exists: every test reaches SQS only through moto,
        // so no other thread is making SDK calls or reading the environment
        // outside std's lock. The clients set region and credentials, so
        // nothing should ask instance metadata anyway; this makes sure.
        unsafe { std::env::set_var("AWS_EC2_METADATA_DISABLED", "true") };
    }
    assert!(
        binary.exists(),
        "moto_server not found at {}: run scripts/test, which installs moto into .venv/moto, or set {MOTO_SERVER}",
        binary.display()
    );
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free local port");
        listener.local_addr().expect("local address").port()
    };
    // `setsid` makes the shell the leader of a new process group holding
    // moto (which may run as more than one process); at EOF on stdin the
    // shell kills that whole group, itself included.
    let mut guardian = Command::new("setsid")
        .args([
            "sh",
            "-c",
            r#""$0" -H 127.0.0.1 -p "$1" >/dev/null 2>&1 & cat >/dev/null; kill -TERM -$$"#,
        ])
        .arg(&binary)
        .arg(port.to_string())
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
        std::thread::sleep(Duration::from_millis(50));
    }
    Moto {
        endpoint: format!("http://127.0.0.1:{port}"),
        _stdin: Mutex::new(stdin),
        _guardian: Mutex::new(guardian),
    }
}
