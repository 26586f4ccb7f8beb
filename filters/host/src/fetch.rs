//! Downloading module bytes for the `url` (HTTPS) and `oci` sources.
//!
//! The host API is synchronous and a download happens only on a cache miss,
//! so each fetch runs a small current-thread runtime on a thread of its own:
//! that works whether or not the caller is itself inside an async runtime.
//! Every download is bounded (connect and total timeouts, a byte cap, a
//! limited number of redirects) and refuses plain HTTP except for hosts the
//! host configuration lists. The bytes returned are checked against the
//! module's `sha256` pin by the caller before anything is compiled.

use std::{fmt, future::Future, pin::Pin, sync::Arc, task, time::Duration};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client as OciClient, Reference};
use reqwest::Url;

use crate::LoadError;
use crate::signature::{self, SIGNATURE_ANNOTATION, SignatureLayer, SigningKeys};

/// Most redirects a `url` download follows.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// Layer media types of a Wasm component pushed as an OCI artifact: the
/// CNCF Wasm artifact layout (`application/wasm`) and the older layouts
/// still produced by common push tools.
pub(crate) const WASM_LAYER_MEDIA_TYPES: &[&str] = &[
    "application/wasm",
    "application/vnd.wasm.content.layer.v1+wasm",
    "application/vnd.module.wasm.content.layer.v1+wasm",
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm",
];

/// Credentials for one OCI registry (HTTP basic authentication; for most
/// registries the password may be an access token). Anonymous pulls need
/// none.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryCredentials {
    /// The registry as written in references, e.g. `ghcr.io` or
    /// `registry.example.com:5000`.
    pub registry: String,
    /// User name.
    pub username: String,
    /// Password or token.
    pub password: String,
}

impl fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryCredentials")
            .field("registry", &self.registry)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The download settings taken from `HostConfig`.
pub(crate) struct FetchSettings<'a> {
    pub plain_http_hosts: &'a [String],
    pub connect_timeout: Duration,
    pub total_timeout: Duration,
    pub max_bytes: usize,
    pub credentials: &'a [RegistryCredentials],
}

/// Whether `host` (and `port`) is listed for plain HTTP. An entry matches
/// either the bare host or `host:port`.
fn plain_http_allowed(list: &[String], host: &str, port: Option<u16>) -> bool {
    list.iter().any(|entry| {
        entry.eq_ignore_ascii_case(host)
            || port.is_some_and(|port| entry.eq_ignore_ascii_case(&format!("{host}:{port}")))
    })
}

/// Splits a registry name (`host`, `host:port`, `[v6]:port`) for the
/// plain-HTTP check.
fn split_registry(registry: &str) -> (&str, Option<u16>) {
    match registry.rsplit_once(':') {
        Some((host, port)) if !host.starts_with('[') || host.ends_with(']') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (registry, None),
        },
        _ => (registry, None),
    }
}

/// Runs `fut` to completion on a fresh current-thread runtime in its own
/// thread, bounded by `total`.
fn run_blocking<T, F>(total: Duration, label: &str, fut: F) -> Result<T, LoadError>
where
    T: Send,
    F: Future<Output = Result<T, LoadError>> + Send,
{
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("nodewright-module-fetch".to_string())
            .spawn_scoped(scope, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| download(label, format!("cannot start the download runtime: {e}")))?;
                runtime.block_on(async {
                    match tokio::time::timeout(total, fut).await {
                        Ok(result) => result,
                        Err(_) => Err(download(
                            label,
                            format!(
                                "the download did not finish within {total:?}; check that the source is reachable from the controller"
                            ),
                        )),
                    }
                })
            })
            .map_err(|e| download(label, format!("cannot start the download thread: {e}")))?;
        worker
            .join()
            .unwrap_or_else(|_| Err(download(label, "the download thread panicked".to_string())))
    })
}

/// TLS uses rustls with the ring provider. The HTTP clients take the
/// process-wide default provider, so one is installed if none is yet (an
/// embedding program that installed its own keeps it).
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn download(label: &str, message: String) -> LoadError {
    LoadError::Download {
        source_desc: label.to_string(),
        message,
    }
}

fn too_large(label: &str, limit: usize) -> LoadError {
    LoadError::DownloadTooLarge {
        source_desc: label.to_string(),
        limit_bytes: limit,
    }
}

/// Downloads an `https://` URL (or `http://` to a listed host).
pub(crate) fn fetch_url(url: &str, settings: &FetchSettings<'_>) -> Result<Arc<[u8]>, LoadError> {
    install_crypto_provider();
    let parsed = Url::parse(url).map_err(|e| {
        download(
            url,
            format!(
                "`url` is not a valid URL ({e}); give the full https:// address of the component"
            ),
        )
    })?;
    check_scheme(&parsed, url, settings.plain_http_hosts)?;
    let plain: Vec<String> = settings.plain_http_hosts.to_vec();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if attempt.url().scheme() == "https"
            || (attempt.url().scheme() == "http"
                && plain_http_allowed(
                    &plain,
                    attempt.url().host_str().unwrap_or_default(),
                    attempt.url().port_or_known_default(),
                ))
        {
            attempt.follow()
        } else {
            let to = attempt.url().to_string();
            attempt.error(format!(
                "refusing a redirect to {to}: only HTTPS redirects are followed"
            ))
        }
    });
    let client = reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.total_timeout)
        .redirect(policy)
        .build()
        .map_err(|e| download(url, format!("cannot build the HTTP client: {e}")))?;
    let max = settings.max_bytes;
    run_blocking(settings.total_timeout, url, async move {
        let mut response = client
            .get(parsed)
            .send()
            .await
            .map_err(|e| download(url, describe_reqwest(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(download(
                url,
                format!(
                    "the server answered HTTP {status}; check the URL and that the component is published there"
                ),
            ));
        }
        if response
            .content_length()
            .is_some_and(|len| len > max as u64)
        {
            return Err(too_large(url, max));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| download(url, describe_reqwest(&e)))?
        {
            if body.len() + chunk.len() > max {
                return Err(too_large(url, max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Arc::from(body))
    })
}

fn check_scheme(url: &Url, label: &str, plain_http_hosts: &[String]) -> Result<(), LoadError> {
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let host = url.host_str().unwrap_or_default();
            if plain_http_allowed(plain_http_hosts, host, url.port_or_known_default()) {
                Ok(())
            } else {
                Err(LoadError::InsecureSource {
                    source_desc: label.to_string(),
                    host: host.to_string(),
                })
            }
        }
        other => Err(download(
            label,
            format!("`url` has scheme `{other}`; only https:// is supported"),
        )),
    }
}

/// An error with its causes: the HTTP clients' `Display` leaves out the
/// cause (connection refused, certificate, timeout...), which is what a user
/// needs to see.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            message.push_str(": ");
            message.push_str(&cause_text);
        }
        source = cause.source();
    }
    message
}

fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut message = with_causes(e);
    if e.is_timeout() {
        message.push_str(" (timed out)");
    }
    if e.is_connect() || e.is_timeout() {
        message.push_str("; check that the address is reachable from the controller");
    }
    message
}

/// A registry client for `reference`, with its parsed form and the
/// credentials for its registry.
struct OciSession {
    client: OciClient,
    reference: Reference,
    auth: RegistryAuth,
}

fn oci_session(
    reference: &str,
    label: &str,
    settings: &FetchSettings<'_>,
) -> Result<OciSession, LoadError> {
    let parsed: Reference = reference
        .trim_start_matches("oci://")
        .parse()
        .map_err(|e| {
            download(
                label,
                format!(
                    "`oci` is not a valid reference ({e}); write registry/repository:tag or registry/repository@sha256:DIGEST"
                ),
            )
        })?;
    let registry = parsed.resolve_registry().to_string();
    let (host, port) = split_registry(&registry);
    let protocol = if plain_http_allowed(settings.plain_http_hosts, host, port) {
        ClientProtocol::HttpsExcept(vec![registry.clone()])
    } else {
        ClientProtocol::Https
    };
    let config = ClientConfig {
        protocol,
        connect_timeout: Some(settings.connect_timeout),
        read_timeout: Some(settings.total_timeout),
        // A tag pointing at a multi-platform index is refused rather than
        // resolved to the controller's own platform: a component has none.
        platform_resolver: None,
        ..ClientConfig::default()
    };
    let auth = settings
        .credentials
        .iter()
        .find(|c| c.registry == parsed.registry() || c.registry == registry)
        .map(|c| RegistryAuth::Basic(c.username.clone(), c.password.clone()))
        .unwrap_or(RegistryAuth::Anonymous);
    install_crypto_provider();
    let client = OciClient::try_from(config)
        .map_err(|e| download(label, format!("cannot build the registry client: {e}")))?;
    Ok(OciSession {
        client,
        reference: parsed,
        auth,
    })
}

/// The label of an `oci:` reference in messages.
fn oci_label(reference: &str) -> String {
    format!("oci://{}", reference.trim_start_matches("oci://"))
}

/// Pulls the single Wasm layer of the OCI artifact `reference`
/// (`registry/repository:tag` or `registry/repository@sha256:...`, with or
/// without an `oci://` prefix).
pub(crate) fn fetch_oci(
    reference: &str,
    settings: &FetchSettings<'_>,
) -> Result<Arc<[u8]>, LoadError> {
    let label = oci_label(reference);
    let label = label.as_str();
    let OciSession {
        client,
        reference: parsed,
        auth,
    } = oci_session(reference, label, settings)?;
    let max = settings.max_bytes;
    run_blocking(settings.total_timeout, label, async move {
        let (manifest, _digest) = client
            .pull_image_manifest(&parsed, &auth)
            .await
            .map_err(|e| match e {
                OciDistributionError::ImageIndexParsingNoPlatformResolverError => download(
                    label,
                    "the reference names a multi-platform image index, not a component artifact; reference the component's own manifest (by tag or @sha256 digest)".to_string(),
                ),
                e => download(label, format!("cannot get the manifest: {}", with_causes(&e))),
            })?;
        let layer = single_wasm_layer(label, &manifest.layers)?;
        if usize::try_from(layer.size).map_or(true, |size| size > max) {
            return Err(too_large(label, max));
        }
        let mut sink = CappedSink {
            bytes: Vec::new(),
            max,
            overflowed: false,
        };
        client
            .pull_blob(&parsed, layer, &mut sink)
            .await
            .map_err(|e| {
                if sink.overflowed {
                    too_large(label, max)
                } else {
                    download(
                        label,
                        format!("cannot get the layer {}: {}", layer.digest, with_causes(&e)),
                    )
                }
            })?;
        Ok(Arc::from(sink.bytes))
    })
}

/// Largest signature payload read (cosign's are a few hundred bytes).
const MAX_SIGNATURE_PAYLOAD: usize = 64 * 1024;

/// Checks that the OCI artifact `reference` holds the module pinned as
/// `pin` (its one Wasm layer's digest) and that its manifest carries a
/// cosign signature made by a key of `keys` (see [`signature`]); returns
/// the signing key's name.
pub(crate) fn verify_oci_signature(
    reference: &str,
    pin: &str,
    keys: &SigningKeys,
    settings: &FetchSettings<'_>,
) -> Result<String, LoadError> {
    let label = oci_label(reference);
    let refused = |reason: String| LoadError::Signature {
        source_desc: label.clone(),
        keys: keys.describe(),
        reason,
    };
    let OciSession {
        client,
        reference: parsed,
        auth,
    } = oci_session(reference, &label, settings)?;
    let (digest, layers) = run_blocking(settings.total_timeout, &label, async {
        let (manifest, digest) = client
            .pull_image_manifest(&parsed, &auth)
            .await
            .map_err(|e| {
                download(
                    &label,
                    format!("cannot get the manifest: {}", with_causes(&e)),
                )
            })?;
        let layer = single_wasm_layer(&label, &manifest.layers)?;
        if layer.digest != format!("sha256:{pin}") {
            return Err(refused(format!(
                "the manifest's layer is {}, not the pinned module sha256:{pin}",
                layer.digest
            )));
        }
        let tag = signature::signature_tag(&digest);
        let signatures = Reference::with_tag(
            parsed.registry().to_string(),
            parsed.repository().to_string(),
            tag.clone(),
        );
        let (manifest, _) = client
            .pull_image_manifest(&signatures, &auth)
            .await
            .map_err(|e| {
                refused(format!(
                    "it has no cosign signature (no tag {tag}: {}); sign it with `cosign sign --key KEY {}@{digest}`",
                    with_causes(&e),
                    repository_of(&parsed)
                ))
            })?;
        let mut layers = Vec::new();
        for layer in &manifest.layers {
            let Some(signature) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            if usize::try_from(layer.size).map_or(true, |size| size > MAX_SIGNATURE_PAYLOAD) {
                continue;
            }
            let mut sink = CappedSink {
                bytes: Vec::new(),
                max: MAX_SIGNATURE_PAYLOAD,
                overflowed: false,
            };
            client
                .pull_blob(&signatures, layer, &mut sink)
                .await
                .map_err(|e| {
                    download(
                        &label,
                        format!(
                            "cannot get the signature payload {}: {}",
                            layer.digest,
                            with_causes(&e)
                        ),
                    )
                })?;
            layers.push(SignatureLayer {
                payload: sink.bytes,
                signature: signature.clone(),
            });
        }
        Ok((digest, layers))
    })?;
    signature::check(keys, &digest, &layers).map_err(refused)
}

/// `registry/repository` of `reference`, without tag or digest (a
/// registry's port stays).
fn repository_of(reference: &Reference) -> String {
    format!("{}/{}", reference.registry(), reference.repository())
}

/// The one layer holding the component, or an error naming what was found.
fn single_wasm_layer<'m>(
    label: &str,
    layers: &'m [OciDescriptor],
) -> Result<&'m OciDescriptor, LoadError> {
    match layers {
        [layer] if WASM_LAYER_MEDIA_TYPES.contains(&layer.media_type.as_str()) => Ok(layer),
        _ => Err(LoadError::NotAComponentArtifact {
            source_desc: label.to_string(),
            media_types: layers.iter().map(|l| l.media_type.clone()).collect(),
        }),
    }
}

/// Collects a blob in memory and refuses bytes past the cap, remembering
/// that it did so the caller can report the size rather than an I/O error.
struct CappedSink {
    bytes: Vec<u8>,
    max: usize,
    overflowed: bool,
}

impl tokio::io::AsyncWrite for CappedSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut task::Context<'_>,
        buf: &[u8],
    ) -> task::Poll<std::io::Result<usize>> {
        if self.bytes.len() + buf.len() > self.max {
            self.overflowed = true;
            return task::Poll::Ready(Err(std::io::Error::other("layer larger than the cap")));
        }
        self.bytes.extend_from_slice(buf);
        task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        _cx: &mut task::Context<'_>,
    ) -> task::Poll<std::io::Result<()>> {
        task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        _cx: &mut task::Context<'_>,
    ) -> task::Poll<std::io::Result<()>> {
        task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_matches_host_or_host_and_port() {
        let list = vec!["localhost".to_string(), "127.0.0.1:5000".to_string()];
        assert!(plain_http_allowed(&list, "localhost", Some(8080)));
        assert!(plain_http_allowed(&list, "127.0.0.1", Some(5000)));
        assert!(!plain_http_allowed(&list, "127.0.0.1", Some(5001)));
        assert!(!plain_http_allowed(&list, "example.com", Some(80)));
    }

    #[test]
    fn registry_names_split_into_host_and_port() {
        assert_eq!(split_registry("ghcr.io"), ("ghcr.io", None));
        assert_eq!(split_registry("127.0.0.1:5000"), ("127.0.0.1", Some(5000)));
        assert_eq!(split_registry("[::1]:5000"), ("[::1]", Some(5000)));
    }
}
