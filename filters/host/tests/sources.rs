//! `url` and `oci` module sources against servers started on 127.0.0.1
//! inside each test: a minimal HTTP/1.1 responder, and an OCI registry
//! emulation serving `/v2/`, manifests and blobs.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use nodewright_filter::{Context, Verdict};
use nodewright_host::harness::{self, it};
use nodewright_host::{
    Host, HostConfig, InstanceTypeSet, Limits, LoadError, LoadedModule, ModuleRef, Role, sha256_hex,
};

/// The well-behaved test filter's bytes and pin.
fn component() -> (Vec<u8>, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test-components")
        .join("misbehaving-filter");
    let path = harness::build_component(&dir).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let pin = sha256_hex(&bytes);
    (bytes, pin)
}

/// The loaded filter answers like the component it was built from.
fn answers(module: LoadedModule) {
    let module = module.with_limits(Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    });
    let ctx = Context {
        config: r#"{"mode":"name-length"}"#.to_string(),
        ..Context::default()
    };
    let candidates =
        InstanceTypeSet::new(vec![it("m7g.large").build(), it("c7i-flex.xlarge").build()]);
    let verdicts = module.filter(&ctx, &candidates).unwrap();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Keep,
            Verdict::drop("c7i-flex.xlarge has a long name")
        ]
    );
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Send `Content-Length`; without it the body ends when the
    /// connection closes.
    length: bool,
}

impl Reply {
    fn ok(body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body,
            length: true,
        }
    }

    fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            length: true,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

type Route = dyn Fn(&str) -> Reply + Send + Sync;

/// A one-connection-at-a-time HTTP/1.1 server on 127.0.0.1 that records
/// every request path. Stopped when dropped.
struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(route: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let route: Arc<Route> = Arc::new(route);
        let thread = {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, &*route, &requests);
                    }
                }
            })
        };
        Server {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`, as listed in `plain_http_hosts`.
    fn authority(&self) -> String {
        self.addr.to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut stream: TcpStream, route: &Route, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            // Not HTTP (a TLS handshake): hang up at once.
            Ok(1) if head.is_empty() && !byte[0].is_ascii_uppercase() => return,
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let Some(path) = head.split_whitespace().nth(1) else {
        return;
    };
    requests.lock().unwrap().push(path.to_string());
    let reply = route(path);
    let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
    if reply.length {
        out.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    for (name, value) in &reply.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(&reply.body);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn serving(body: Vec<u8>) -> Server {
    Server::start(move |path| match path {
        "/filter.wasm" => Reply::ok(body.clone()),
        _ => Reply::status(404),
    })
}

fn config_for(server: &Server) -> HostConfig {
    HostConfig {
        plain_http_hosts: vec![server.authority()],
        ..HostConfig::default()
    }
}

/// Loads `source` (a `url` or `oci` reference) as an instance filter pinned
/// to `pin`.
fn load_filter(host: &Host, source: &str, pin: &str) -> Result<LoadedModule, LoadError> {
    host.load(Role::InstanceFilter, &ModuleRef::parse(source), Some(pin))
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("nodewright-sources-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn url_source_downloads_verifies_and_runs() {
    let (bytes, pin) = component();
    let server = serving(bytes);
    let host = Host::new(config_for(&server)).unwrap();
    let module = load_filter(&host, &server.url("/filter.wasm"), &pin).unwrap();
    answers(module);
    assert_eq!(server.requests(), vec!["/filter.wasm"]);
}

#[test]
fn url_source_with_tampered_bytes_is_a_digest_mismatch() {
    let (mut bytes, pin) = component();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let server = serving(bytes);
    let host = Host::new(config_for(&server)).unwrap();
    let err = load_filter(&host, &server.url("/filter.wasm"), &pin).unwrap_err();
    assert!(
        matches!(&err, LoadError::DigestMismatch { expected, actual, .. } if *expected == pin && *actual != pin),
        "{err:?}"
    );
}

#[test]
fn plain_http_is_refused_unless_the_host_is_listed() {
    let (bytes, pin) = component();
    let server = serving(bytes);
    let host = Host::new(HostConfig::default()).unwrap();
    let err = load_filter(&host, &server.url("/filter.wasm"), &pin).unwrap_err();
    assert!(
        matches!(&err, LoadError::InsecureSource { host, .. } if host == "127.0.0.1"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("`url` must start with https://"),
        "{message}"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    // Listing another port of the same address is not enough.
    let host = Host::new(HostConfig {
        plain_http_hosts: vec!["127.0.0.1:1".to_string()],
        ..HostConfig::default()
    })
    .unwrap();
    let err = load_filter(&host, &server.url("/filter.wasm"), &pin).unwrap_err();
    assert!(matches!(err, LoadError::InsecureSource { .. }), "{err:?}");
}

#[test]
fn oversize_download_is_refused_with_or_without_a_length() {
    let (bytes, pin) = component();
    let with_length = bytes.clone();
    let server = Server::start(move |path| match path {
        "/sized.wasm" => Reply::ok(with_length.clone()),
        "/streamed.wasm" => Reply {
            length: false,
            ..Reply::ok(with_length.clone())
        },
        _ => Reply::status(404),
    });
    let limit = bytes.len() / 2;
    let host = Host::new(HostConfig {
        max_download_bytes: limit,
        ..config_for(&server)
    })
    .unwrap();
    for path in ["/sized.wasm", "/streamed.wasm"] {
        let err = load_filter(&host, &server.url(path), &pin).unwrap_err();
        assert!(
            matches!(&err, LoadError::DownloadTooLarge { limit_bytes, .. } if *limit_bytes == limit),
            "{path}: {err:?}"
        );
    }
    // The same bytes under a cap they fit are accepted.
    let host = Host::new(HostConfig {
        max_download_bytes: bytes.len(),
        ..config_for(&server)
    })
    .unwrap();
    answers(load_filter(&host, &server.url("/streamed.wasm"), &pin).unwrap());
}

#[test]
fn missing_url_is_a_download_error_naming_the_status() {
    let (bytes, pin) = component();
    let server = serving(bytes);
    let host = Host::new(config_for(&server)).unwrap();
    let url = server.url("/gone.wasm");
    let err = load_filter(&host, &url, &pin).unwrap_err();
    assert!(
        matches!(&err, LoadError::Download { source_desc, message } if *source_desc == url && message.contains("404")),
        "{err:?}"
    );
}

#[test]
fn redirects_are_followed_up_to_a_limit() {
    let (bytes, pin) = component();
    let server = Server::start(move |path| match path {
        "/filter.wasm" => Reply::ok(bytes.clone()),
        "/moved.wasm" => Reply::status(302).header("Location", "/filter.wasm"),
        "/loop.wasm" => Reply::status(302).header("Location", "/loop.wasm"),
        _ => Reply::status(404),
    });
    let host = Host::new(config_for(&server)).unwrap();
    answers(load_filter(&host, &server.url("/moved.wasm"), &pin).unwrap());
    // A fresh host: the first one has this pin compiled and would not fetch.
    let host = Host::new(config_for(&server)).unwrap();
    let err = load_filter(&host, &server.url("/loop.wasm"), &pin).unwrap_err();
    assert!(
        matches!(&err, LoadError::Download { message, .. } if message.contains("redirect")),
        "{err:?}"
    );
    let loops = server
        .requests()
        .iter()
        .filter(|p| *p == "/loop.wasm")
        .count();
    assert!((2..=10).contains(&loops), "{loops} requests");
}

const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

fn descriptor(media_type: &str, bytes: &[u8]) -> serde_json::Value {
    serde_json::json!({
        "mediaType": media_type,
        "digest": format!("sha256:{}", sha256_hex(bytes)),
        "size": bytes.len(),
    })
}

/// A registry holding `filters/drop:v1`, whose manifest lists `layers`
/// (media type and bytes, each served as a blob).
fn registry(layers: Vec<(&str, Vec<u8>)>) -> (Server, String) {
    let config = b"{}".to_vec();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": "application/vnd.wasm.config.v0+json",
        "config": descriptor("application/vnd.wasm.config.v0+json", &config),
        "layers": layers
            .iter()
            .map(|(media_type, bytes)| descriptor(media_type, bytes))
            .collect::<Vec<_>>(),
    }))
    .unwrap();
    let manifest_digest = format!("sha256:{}", sha256_hex(&manifest));
    let mut blobs: Vec<(String, Vec<u8>)> = layers
        .into_iter()
        .map(|(_, bytes)| (format!("sha256:{}", sha256_hex(&bytes)), bytes))
        .collect();
    blobs.push((format!("sha256:{}", sha256_hex(&config)), config));
    let by_digest = format!("/v2/filters/drop/manifests/{manifest_digest}");
    let digest = manifest_digest.clone();
    let server = Server::start(move |path| {
        if path == "/v2/" {
            return Reply::ok(b"{}".to_vec());
        }
        if path == "/v2/filters/drop/manifests/v1" || path == by_digest {
            return Reply::ok(manifest.clone())
                .header("Content-Type", MANIFEST_TYPE)
                .header("Docker-Content-Digest", &digest);
        }
        if let Some(digest) = path.strip_prefix("/v2/filters/drop/blobs/")
            && let Some((_, bytes)) = blobs.iter().find(|(d, _)| d == digest)
        {
            return Reply::ok(bytes.clone())
                .header("Content-Type", "application/octet-stream")
                .header("Docker-Content-Digest", digest);
        }
        Reply::status(404)
    });
    (server, manifest_digest)
}

#[test]
fn oci_source_pulls_the_component_layer_by_tag_or_digest() {
    let (bytes, pin) = component();
    let (server, manifest_digest) = registry(vec![("application/wasm", bytes)]);
    let by_tag = format!("oci://{}/filters/drop:v1", server.authority());
    let host = Host::new(config_for(&server)).unwrap();
    answers(load_filter(&host, &by_tag, &pin).unwrap());
    let blob = format!("/v2/filters/drop/blobs/sha256:{pin}");
    let requests = server.requests();
    assert!(
        requests.contains(&"/v2/filters/drop/manifests/v1".to_string()),
        "{requests:?}"
    );
    assert!(requests.contains(&blob), "{requests:?}");

    // By manifest digest, as an EC2NodeClass writes it (no `oci://`).
    let by_digest = format!("{}/filters/drop@{manifest_digest}", server.authority());
    let host = Host::new(config_for(&server)).unwrap();
    answers(
        host.load(Role::InstanceFilter, &ModuleRef::Oci(by_digest), Some(&pin))
            .unwrap(),
    );
    assert!(
        server
            .requests()
            .contains(&format!("/v2/filters/drop/manifests/{manifest_digest}")),
        "{:?}",
        server.requests()
    );
}

#[test]
fn oci_manifest_with_two_layers_is_refused_naming_the_media_types() {
    let (bytes, pin) = component();
    let (server, _) = registry(vec![
        ("application/wasm", bytes),
        (
            "application/vnd.oci.image.layer.v1.tar+gzip",
            b"readme".to_vec(),
        ),
    ]);
    let host = Host::new(config_for(&server)).unwrap();
    let reference = format!("oci://{}/filters/drop:v1", server.authority());
    let err = load_filter(&host, &reference, &pin).unwrap_err();
    assert!(
        matches!(&err, LoadError::NotAComponentArtifact { media_types, .. } if media_types.len() == 2),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
        "{message}"
    );
    assert!(
        !server.requests().iter().any(|p| p.contains("/blobs/")),
        "no blob is pulled: {:?}",
        server.requests()
    );
}

#[test]
fn oci_source_is_refused_over_plain_http_unless_listed() {
    let (bytes, pin) = component();
    let (server, _) = registry(vec![("application/wasm", bytes)]);
    let host = Host::new(HostConfig {
        download_connect_timeout: Duration::from_secs(5),
        download_timeout: Duration::from_secs(20),
        ..HostConfig::default()
    })
    .unwrap();
    let reference = format!("oci://{}/filters/drop:v1", server.authority());
    let err = load_filter(&host, &reference, &pin).unwrap_err();
    // The client speaks TLS to a plain-HTTP server: the handshake fails and
    // no request is ever understood.
    assert!(matches!(err, LoadError::Download { .. }), "{err:?}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn a_pinned_module_already_compiled_is_not_downloaded_again() {
    let (bytes, pin) = component();
    let (registry, _) = registry(vec![("application/wasm", bytes.clone())]);
    let web = serving(bytes);
    let cache = scratch_dir("pin-cache");
    let config = HostConfig {
        cache_dir: Some(cache.clone()),
        plain_http_hosts: vec![registry.authority(), web.authority()],
        ..HostConfig::default()
    };
    let oci = ModuleRef::parse(&format!("oci://{}/filters/drop:v1", registry.authority()));
    let url = ModuleRef::parse(&web.url("/filter.wasm"));

    let host = Host::new(config.clone()).unwrap();
    answers(host.load(Role::InstanceFilter, &oci, Some(&pin)).unwrap());
    let pulled = registry.requests().len();
    assert!(pulled >= 2, "{:?}", registry.requests());

    // The same pin from memory, whatever the source now says...
    answers(host.load(Role::InstanceFilter, &oci, Some(&pin)).unwrap());
    answers(host.load(Role::InstanceFilter, &url, Some(&pin)).unwrap());
    // ...and from the precompiled artifact on disk in a new host.
    let host = Host::new(config).unwrap();
    answers(host.load(Role::InstanceFilter, &oci, Some(&pin)).unwrap());
    answers(host.load(Role::InstanceFilter, &url, Some(&pin)).unwrap());

    assert_eq!(
        registry.requests().len(),
        pulled,
        "{:?}",
        registry.requests()
    );
    assert!(web.requests().is_empty(), "{:?}", web.requests());
    let _ = std::fs::remove_dir_all(&cache);
}
