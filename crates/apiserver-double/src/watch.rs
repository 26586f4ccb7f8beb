//! Watches: newline-delimited JSON events from a resourceVersion on, read
//! from the kept history (so a slow watcher loses nothing while its
//! resourceVersion is in the window), with selectors applied to the old
//! and new object (an object that stops matching is `DELETED`), periodic
//! `BOOKMARK`s, the streaming-list end bookmark, and an `ERROR` event with
//! a 410 `Expired` Status when the history no longer reaches back. A fault
//! plan may end a watch early, dropped or expired ([`crate::faults`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};

use super::error::ApiError;
use super::faults::{WatchEnd, WatchFaults};
use super::path::Route;
use super::request::{Context, Shape, error_response, shaped_text};
use super::resources::ResourceDef;
use super::selector::Selector;
use super::store::{Change, EventType};
use super::{ApiServer, ResponseBody};

/// The default lifetime of a watch without `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

fn line(event: &str, object: &Value) -> Bytes {
    raw_line(event, &object.to_string())
}

/// A watch event around an already serialized object.
fn raw_line(event: &str, object: &str) -> Bytes {
    Bytes::from(format!("{{\"type\":\"{event}\",\"object\":{object}}}\n"))
}

fn bookmark(def: &ResourceDef, version: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": version.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata}),
    )
}

fn expired(requested: u64, oldest: u64) -> Bytes {
    let error = ApiError::expired(format!(
        "too old resource version: {requested} ({})",
        oldest + 1
    ));
    line("ERROR", &error.to_status())
}

/// What one watcher selects.
struct Filter {
    def: Arc<ResourceDef>,
    namespace: Option<String>,
    selector: Selector,
    shape: Shape,
}

impl Filter {
    /// The event a change produces for this watcher, if any.
    fn event(&self, change: &Change) -> Option<Bytes> {
        if *change.storage != self.def.storage
            || self
                .namespace
                .as_ref()
                .is_some_and(|ns| *ns != change.namespace)
        {
            return None;
        }
        let now = self.selector.matches(&change.object);
        let before = change
            .previous
            .as_ref()
            .is_some_and(|p| self.selector.matches(p));
        let event = match (change.event, before, now) {
            (EventType::Added, _, true) => EventType::Added,
            (EventType::Deleted, true, _) => EventType::Deleted,
            (EventType::Modified, true, true) => EventType::Modified,
            (EventType::Modified, false, true) => EventType::Added,
            (EventType::Modified, true, false) => EventType::Deleted,
            _ => return None,
        };
        Some(raw_line(
            event.as_str(),
            &shaped_text(&self.def, &change.object, self.shape),
        ))
    }
}

/// Sends `event`; false when the watch is over — the client went away, or
/// the fault plan ended the watch after it (counted, and with a 410 Status
/// first when it expires).
async fn send(
    server: &ApiServer,
    tx: &tokio::sync::mpsc::Sender<Bytes>,
    faults: &mut Option<WatchFaults>,
    event: Bytes,
    sent_up_to: u64,
) -> bool {
    if tx.send(event).await.is_err() {
        return false;
    }
    let Some(end) = faults.as_mut().and_then(WatchFaults::after_event) else {
        return true;
    };
    server.faults().ended(end);
    if end == WatchEnd::Expire {
        let error = ApiError::expired(format!(
            "The resourceVersion for the provided watch is too old: {sent_up_to}"
        ));
        let _ = tx.send(line("ERROR", &error.to_status())).await;
    }
    false
}

/// Serves a watch; `faults` may end it early (see [`crate::faults`]).
pub fn watch(
    server: &ApiServer,
    route: &Route,
    context: &Context,
    mut faults: Option<WatchFaults>,
) -> Response<ResponseBody> {
    let selector = match Selector::from_params(&context.params) {
        Ok(selector) => selector,
        Err(e) => return error_response(&ApiError::bad_request(e)),
    };
    let filter = Filter {
        def: route.def.clone(),
        namespace: route.namespace.clone(),
        selector,
        shape: context.shape,
    };
    let requested: Option<u64> = context
        .param("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
        .map(|v| v.parse().unwrap_or(0));
    let send_initial = context.param("sendInitialEvents") == Some("true");
    let bookmarks = context.param("allowWatchBookmarks") == Some("true");
    let timeout = context
        .param("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let interval = server.inner.bookmark_interval;

    // Subscribe before reading, so no write between the two is missed.
    let mut versions = server.inner.version.subscribe();
    // The first events, under the lock: current objects, or the history.
    let mut first: Vec<Bytes> = Vec::new();
    let mut sent_up_to;
    {
        let state = server.lock();
        let current = state.store.current_version();
        match requested {
            Some(version) if !send_initial => match state.store.changes_after(version) {
                Ok(changes) => {
                    first.extend(changes.filter_map(|c| filter.event(c)));
                    sent_up_to = current;
                }
                Err(e) => {
                    first.push(expired(version, e.oldest));
                    return stream(first, None);
                }
            },
            _ => {
                for object in state
                    .store
                    .list(&filter.def.storage, filter.namespace.as_deref())
                {
                    if filter.selector.matches(object) {
                        first.push(raw_line(
                            "ADDED",
                            &shaped_text(&filter.def, object, filter.shape),
                        ));
                    }
                }
                sent_up_to = current;
                if send_initial {
                    first.push(bookmark(&filter.def, current, true));
                }
            }
        }
    }

    let server = server.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        for event in first {
            if !send(&server, &tx, &mut faults, event, sent_up_to).await {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(bookmark(&filter.def, sent_up_to, false)).await.is_err() {
                        return;
                    }
                }
                changed = versions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let (events, expired_at) = {
                        let state = server.lock();
                        let latest = state.store.current_version();
                        match state.store.changes_after(sent_up_to) {
                            Ok(changes) => {
                                let events: Vec<Bytes> = changes.filter_map(|c| filter.event(c)).collect();
                                sent_up_to = latest;
                                (events, None)
                            }
                            Err(e) => (Vec::new(), Some(e.oldest)),
                        }
                    };
                    if let Some(oldest) = expired_at {
                        let _ = tx.send(expired(sent_up_to, oldest)).await;
                        return;
                    }
                    for event in events {
                        if !send(&server, &tx, &mut faults, event, sent_up_to).await {
                            return;
                        }
                    }
                }
            }
        }
    });
    stream(Vec::new(), Some(rx))
}

/// A streaming response of `first` events, then whatever `rx` yields.
fn stream(
    first: Vec<Bytes>,
    rx: Option<tokio::sync::mpsc::Receiver<Bytes>>,
) -> Response<ResponseBody> {
    let state = (first.into_iter(), rx);
    let body = futures::stream::unfold(state, |(mut first, mut rx)| async move {
        if let Some(event) = first.next() {
            return Some((
                Ok::<_, Infallible>(http_body::Frame::data(event)),
                (first, rx),
            ));
        }
        let event = rx.as_mut()?.recv().await?;
        Some((Ok(http_body::Frame::data(event)), (first, rx)))
    });
    let mut response = Response::new(StreamBody::new(body).boxed_unsync());
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
