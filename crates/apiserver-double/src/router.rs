//! HTTP routing: which path and verb go where. `/version` and the health
//! endpoints, discovery and OpenAPI, watches, lists, and each verb and
//! subresource of a resource, dispatched to the verbs; writes settle the
//! control loops and wake watches. Targeted requests meet the fault plan
//! ([`faults`]) after authorization.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::error::ApiError;
use super::path::{self, Route};
use super::request::{
    Context, Shape, error_response, json_response, json_response_with_type, manager,
    text_json_response, text_response,
};
use super::resources::ResourceDef;
use super::{ApiServer, ResponseBody, authz, discovery, faults, openapi, verbs, watch};

pub async fn handle(server: &ApiServer, request: Request<Bytes>) -> Response<ResponseBody> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let params = path::query_params(parts.uri.query().unwrap_or_default());
    let header = |name: http::header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let accept = header(http::header::ACCEPT);
    let account = {
        let state = server.lock();
        let authorization = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or_default());
        state.authz.authenticate(&state.store, authorization)
    };
    let account = match account {
        Ok(account) => account,
        Err(e) => return error_response(&e),
    };
    // Version, health and discovery are open to every authenticated caller,
    // as kube-apiserver's system:discovery and system:public-info-viewer
    // roles make them.
    match path.trim_end_matches('/') {
        "/version" => {
            let (major, minor) = &server.inner.kubernetes_version;
            return json_response(
                StatusCode::OK,
                &json!({
                    "major": major, "minor": minor, "gitVersion": format!("v{major}.{minor}.0"),
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                    "compiler": "", "platform": "linux/amd64",
                }),
            );
        }
        "/healthz" | "/readyz" | "/livez" => return text_response(StatusCode::OK, "ok"),
        _ => {}
    }
    if let Some(response) = serve_discovery(server, &path, &accept) {
        return response;
    }
    let route = {
        let state = server.lock();
        path::route(&state.registry, &path)
    };
    let Some(route) = route else {
        return error_response(&ApiError::no_route());
    };
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = authz::verb(&parts.method, route.name.is_some(), watch);
    if let Some(account) = &account {
        let list_name = params
            .get("fieldSelector")
            .and_then(|s| s.strip_prefix("metadata.name="))
            .filter(|name| !name.contains(','));
        let mut state = server.lock();
        let super::State { store, authz, .. } = &mut *state;
        if let Err(e) = authz.authorize(store, account, verb, &route, list_name) {
            return error_response(&e);
        }
    }
    // Faults come after authorization, as a real server's would: a refused
    // request is refused whatever the load.
    let fault = draw_fault(server, verb, account.is_some(), &route);
    let (late_error, watch_faults) = match fault {
        None => (None, None),
        Some((decision, error, watch_faults)) => {
            if !decision.delay.is_zero() {
                tokio::time::sleep(decision.delay).await;
            }
            match (decision.error, error) {
                (Some(kind), Some(error)) if !kind.after_the_request() => {
                    return error_response(&error);
                }
                (_, late) => (late, watch_faults),
            }
        }
    };
    let context = Context {
        method: parts.method.clone(),
        shape: Shape::from_accept(&accept, &params),
        manager: manager(&params, &parts.headers),
        params,
        content_type: header(http::header::CONTENT_TYPE),
        body,
    };
    if context.method == Method::GET
        && route.name.is_none()
        && context
            .param("watch")
            .is_some_and(|w| w == "true" || w == "1")
    {
        return watch::watch(server, &route, &context, watch_faults);
    }
    if context.method == Method::GET && route.name.is_none() && context.shape == Shape::Object {
        let state = server.lock();
        return match verbs::list_text(&state, &route, &context) {
            Ok(text) => text_json_response(text),
            Err(e) => error_response(&e),
        };
    }
    let result = dispatch(server, &route, &context);
    // The write is applied; its answer is lost.
    if let Some(error) = late_error {
        return error_response(&error);
    }
    match result {
        Ok((status, value)) => json_response(status, &value),
        Err(e) => error_response(&e),
    }
}

/// What the fault plan does to a request of `verb` on `route`: `None` when
/// the request is not targeted; otherwise its delay and error (with the
/// Status it is answered with), and a watch's own faults.
fn draw_fault(
    server: &ApiServer,
    verb: &str,
    with_token: bool,
    route: &Route,
) -> Option<(
    faults::Decision,
    Option<ApiError>,
    Option<faults::WatchFaults>,
)> {
    let mut injector = server.faults();
    let verb = faults::Verb::from_rbac(verb)
        .filter(|_| injector.targets(with_token, &route.def.plural))?;
    let decision = injector.decide(verb);
    let error = decision.error.map(|kind| injector.error(kind, route));
    let watch_faults = (verb == faults::Verb::Watch)
        .then(|| injector.watch())
        .filter(faults::WatchFaults::active);
    Some((decision, error, watch_faults))
}

fn serve_discovery(server: &ApiServer, path: &str, accept: &str) -> Option<Response<ResponseBody>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let state = server.lock();
    let registry = &state.registry;
    let aggregated = discovery::aggregated_version(accept);
    let document = match (segments.as_slice(), aggregated) {
        (["api"], Some(version)) | (["apis"], Some(version)) => {
            let body = discovery::aggregated(registry, segments[0] == "api", version);
            let content_type = format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            );
            return Some(json_response_with_type(
                StatusCode::OK,
                &body,
                &content_type,
            ));
        }
        (["api"], None) => Some(discovery::api_versions()),
        (["apis"], None) => Some(discovery::api_groups(registry)),
        (["api", version], _) => discovery::resource_list(registry, "", version),
        (["apis", group], _) => discovery::api_group(registry, group),
        (["apis", group, version], _) => discovery::resource_list(registry, group, version),
        (["openapi", "v3"], _) => {
            let hash = registry
                .all()
                .iter()
                .flat_map(|d| [d.group.as_str(), d.version.as_str(), d.plural.as_str()])
                .flat_map(str::bytes)
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
            Some(openapi::index(registry, hash))
        }
        (["openapi", "v3", rest @ ..], _) => openapi::document(registry, &rest.join("/")),
        (["openapi", ..], _) => None,
        _ => return None,
    };
    Some(match document {
        Some(document) => json_response(StatusCode::OK, &document),
        None => error_response(&ApiError::no_route()),
    })
}

/// Runs one non-watch request; writes settle the control loops and wake watches.
fn dispatch(
    server: &ApiServer,
    route: &Route,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def: Arc<ResourceDef> = route.def.clone();
    let mut state = server.lock();
    let result = match (
        &context.method,
        route.name.as_deref(),
        route.subresource.as_deref(),
    ) {
        (&Method::GET, None, None) => verbs::list(&state, route, context),
        (&Method::GET, Some(name), None | Some("status")) => {
            verbs::get(&state, route, name, context.shape)
        }
        (&Method::GET, Some(name), Some("scale")) => {
            super::subresources::get_scale(&state, route, name)
        }
        (&Method::POST, None, None) => verbs::create(&mut state, route, context),
        (&Method::POST, Some(name), Some("eviction")) if def.pod_subresources => {
            let body = context.body_json()?;
            super::disruption::evict(
                &mut state,
                route.namespace_or_empty(),
                name,
                &body,
                context.dry_run(),
            )
            .map(|status| (StatusCode::CREATED, status))
        }
        (&Method::POST, Some(name), Some("binding")) if def.pod_subresources => {
            super::subresources::bind(&mut state, route, name, context)
        }
        (&Method::PUT, Some(name), None | Some("status")) => {
            verbs::replace(&mut state, route, name, context)
        }
        (&Method::PUT, Some(name), Some("scale")) => {
            super::subresources::replace_scale(&mut state, route, name, context)
        }
        (&Method::PATCH, Some(name), None | Some("status")) => {
            verbs::patch(&mut state, route, name, context)
        }
        (&Method::PATCH, Some(name), Some("scale")) => {
            super::subresources::patch_scale(&mut state, route, name, context)
        }
        (&Method::DELETE, Some(name), None) => verbs::delete(&mut state, route, name, context),
        (&Method::DELETE, None, None) => verbs::delete_collection(&mut state, route, context),
        (method, _, sub) => Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {}{}",
            def.group_resource(),
            sub.map(|s| format!("/{s}")).unwrap_or_default()
        ))),
    };
    if context.method != Method::GET {
        state.settle();
        let version = state.store.current_version();
        drop(state);
        server.notify(version);
    }
    result
}
