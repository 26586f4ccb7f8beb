//! The verbs on a resource: get, list (selectors, pagination over a
//! consistent snapshot, exact resourceVersions), create, replace, patch
//! (JSON, merge, strategic merge, server-side apply), delete and
//! deletecollection.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::State;
use super::apply::{self, Writer};
use super::error::{ApiError, Cause, success_status};
use super::events;
use super::meta;
use super::patch;
use super::path::Route;
use super::request::{Context, Shape, output, shaped, shaped_text};
use super::resources::ResourceDef;
use super::selector::Selector;
use super::store::ObjKey;
use super::strategic;
use super::table;

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A continue token: the list's resourceVersion and the last key served.
fn encode_continue(version: u64, key: &ObjKey) -> String {
    let text = json!([version, key.0, key.1]).to_string();
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    let invalid = || {
        ApiError::bad_request("continue key is not valid: the token was not issued by this server")
    };
    if !token.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let bytes: Result<Vec<u8>, _> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect();
    let value: Value =
        serde_json::from_slice(&bytes.map_err(|_| invalid())?).map_err(|_| invalid())?;
    let version = value.get(0).and_then(Value::as_u64).ok_or_else(invalid)?;
    let namespace = value.get(1).and_then(Value::as_str).ok_or_else(invalid)?;
    let name = value.get(2).and_then(Value::as_str).ok_or_else(invalid)?;
    Ok((version, (namespace.to_string(), name.to_string())))
}

/// A body as the storage keeps it (Events are stored in their core form).
fn stored_form(def: &ResourceDef, body: Value) -> Value {
    if def.is_event_alias() {
        events::to_core(&body)
    } else {
        body
    }
}

/// The definition writes go through (core Events for `events.k8s.io`).
fn storage_def(state: &State, def: &Arc<ResourceDef>) -> Arc<ResourceDef> {
    if def.is_event_alias() {
        state
            .registry
            .by_storage(&def.storage)
            .unwrap_or_else(|| def.clone())
    } else {
        def.clone()
    }
}

pub fn get(
    state: &State,
    route: &Route,
    name: &str,
    shape: Shape,
) -> Result<(StatusCode, Value), ApiError> {
    let object = state
        .store
        .get(&route.def.storage, route.namespace_or_empty(), name)
        .ok_or_else(|| ApiError::not_found(&route.def, name))?;
    Ok((StatusCode::OK, shaped(&route.def, object, shape)))
}

/// The objects one list request selects (one page) and its list metadata.
fn select(
    state: &State,
    route: &Route,
    context: &Context,
) -> Result<(Vec<Arc<Value>>, Value), ApiError> {
    let def = &route.def;
    let selector = Selector::from_params(&context.params).map_err(ApiError::bad_request)?;
    let limit: Option<usize> = context
        .param("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0);
    let namespace = route.namespace.as_deref();
    let exact = context.param("resourceVersionMatch") == Some("Exact");
    let (version, start, snapshot) = match context.param("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (version, key) = decode_continue(token)?;
            let snapshot = state
                .store
                .snapshot(&def.storage, namespace, version)
                .map_err(|_| ApiError::expired(CONTINUE_EXPIRED))?;
            (version, Some(key), Some(snapshot))
        }
        None if exact => {
            let version: u64 = context
                .param("resourceVersion")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("resourceVersionMatch=Exact needs a resourceVersion")
                })?;
            let snapshot = state
                .store
                .snapshot(&def.storage, namespace, version)
                .map_err(|e| {
                    ApiError::expired(format!(
                        "too old resource version: {version} ({})",
                        e.oldest + 1
                    ))
                })?;
            (version, None, Some(snapshot))
        }
        None => (state.store.current_version(), None, None),
    };
    let all: Box<dyn Iterator<Item = &Arc<Value>>> = match &snapshot {
        Some(snapshot) => Box::new(snapshot.values()),
        None => state.store.list(&def.storage, namespace),
    };
    let after = |object: &Value| {
        start.as_ref().is_none_or(|(ns, name)| {
            (meta::namespace(object), meta::name(object)) > (ns.as_str(), name.as_str())
        })
    };
    let mut matching = all.filter(|o| after(o) && selector.matches(o));
    let mut items: Vec<Arc<Value>> = Vec::new();
    let mut last: Option<ObjKey> = None;
    for object in matching.by_ref() {
        items.push(object.clone());
        if limit.is_some_and(|l| items.len() >= l) {
            last = Some((
                meta::namespace(object).to_string(),
                meta::name(object).to_string(),
            ));
            break;
        }
    }
    let remaining = if last.is_some() { matching.count() } else { 0 };
    let mut metadata = json!({"resourceVersion": version.to_string()});
    if let (Some(last), true) = (last, remaining > 0) {
        metadata["continue"] = json!(encode_continue(version, &last));
        metadata["remainingItemCount"] = json!(remaining);
    }
    Ok((items, metadata))
}

/// A list as a Table or as metadata only.
pub fn list(
    state: &State,
    route: &Route,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let (items, metadata) = select(state, route, context)?;
    let body = match context.shape {
        Shape::Table(include) => {
            let items: Vec<Value> = items.iter().map(|o| output(def, o)).collect();
            table::table(def, &items, metadata, include)
        }
        Shape::Metadata => json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
            "items": items.iter().map(|o| json!({
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
            })).collect::<Vec<_>>(),
        }),
        Shape::Object => {
            let items: Vec<Value> = items.iter().map(|o| output(def, o)).collect();
            json!({"apiVersion": def.api_version(), "kind": format!("{}List", def.kind), "metadata": metadata, "items": items})
        }
    };
    Ok((StatusCode::OK, body))
}

/// A plain list, serialized without copying the objects.
pub fn list_text(state: &State, route: &Route, context: &Context) -> Result<String, ApiError> {
    let def = &route.def;
    let (items, metadata) = select(state, route, context)?;
    let mut text = format!(
        "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{metadata},\"items\":[",
        json!(def.api_version()),
        json!(format!("{}List", def.kind)),
    );
    for (i, object) in items.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&shaped_text(def, object, Shape::Object));
    }
    text.push_str("]}");
    Ok(text)
}

pub fn create(
    state: &mut State,
    route: &Route,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    if def.namespaced && route.namespace.is_none() {
        return Err(ApiError::no_route());
    }
    let body = stored_form(def, context.body_json()?);
    let target = storage_def(state, def);
    let created = state.create(
        &target,
        route.namespace_or_empty(),
        body,
        &context.write_options(),
    )?;
    Ok((StatusCode::CREATED, shaped(def, &created, context.shape)))
}

pub fn replace(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let body = stored_form(def, context.body_json()?);
    let target = storage_def(state, def);
    let subresource = route.subresource.as_deref().unwrap_or_default();
    let updated = state.update(
        &target,
        route.namespace_or_empty(),
        name,
        body,
        subresource,
        &context.write_options(),
    )?;
    Ok((StatusCode::OK, shaped(def, &updated, context.shape)))
}

/// Applies a patch document of `content_type` to `current`.
pub fn apply_patch(
    def: &ResourceDef,
    current: &Value,
    content_type: &str,
    document: &Value,
) -> Result<Value, ApiError> {
    let mut patched = current.clone();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    match media {
        "application/merge-patch+json" => patch::merge(&mut patched, document),
        "application/strategic-merge-patch+json" => {
            if def.is_custom() {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (strategic merge patch is not supported for {})",
                        def.group_resource()
                    ),
                ));
            }
            strategic::apply(&mut patched, document).map_err(ApiError::bad_request)?;
        }
        "application/json-patch+json" => {
            patch::json_patch(&mut patched, document).map_err(|e| match e {
                patch::JsonPatchError::Decode(message) => ApiError::bad_request(message),
                patch::JsonPatchError::Apply(message) => {
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
                }
            })?;
        }
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                format!("patch type {other:?} is not supported"),
            ));
        }
    }
    Ok(patched)
}

pub fn patch(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let target = storage_def(state, def);
    let namespace = route.namespace_or_empty().to_string();
    let subresource = route.subresource.as_deref().unwrap_or_default();
    let document = context.body_json()?;
    let current = state.store.get(&target.storage, &namespace, name).cloned();
    if context.content_type.starts_with("application/apply-patch") {
        return server_side_apply(
            state,
            route,
            &target,
            name,
            current.as_deref(),
            &document,
            context,
        );
    }
    let current = current.ok_or_else(|| ApiError::not_found(def, name))?;
    let view = output(def, &current);
    let patched = stored_form(
        def,
        apply_patch(def, &view, &context.content_type, &document)?,
    );
    let updated = state.update(
        &target,
        &namespace,
        name,
        patched,
        subresource,
        &context.write_options(),
    )?;
    Ok((StatusCode::OK, shaped(def, &updated, context.shape)))
}

fn server_side_apply(
    state: &mut State,
    route: &Route,
    target: &Arc<ResourceDef>,
    name: &str,
    current: Option<&Value>,
    config: &Value,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let Some(manager) = context.param("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::invalid(
            def,
            name,
            vec![Cause::new(
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        ));
    };
    let force = context.param("force") == Some("true");
    let config = stored_form(def, config.clone());
    let subresource = route.subresource.as_deref().unwrap_or_default();
    let api_version = def.api_version();
    let writer = Writer {
        manager,
        api_version: &api_version,
        subresource,
        status_is_subresource: def.status,
    };
    let applied = apply::apply(current, &config, &writer, force).map_err(|conflicts| {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {:?} using {}", c.manager, c.api_version), "field": c.field}))
            .collect();
        let listed: Vec<String> = conflicts
            .iter()
            .map(|c| format!("conflict with {:?} using {}: {}", c.manager, c.api_version, c.field))
            .collect();
        let mut error = ApiError::conflict(def, name, "");
        error.message = format!(
            "Apply failed with {} conflict{}: {}",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" },
            listed.join("\n")
        );
        error.details = Some(json!({"name": name, "group": def.group, "kind": def.plural, "causes": causes}));
        error
    })?;
    let mut options = context.write_options();
    options.applied = true;
    options.manager = manager.to_string();
    let namespace = route.namespace_or_empty();
    if current.is_none() {
        if def.namespaced && route.namespace.is_none() {
            return Err(ApiError::no_route());
        }
        let mut object = applied;
        meta::metadata_mut(&mut object).insert("name".into(), json!(name));
        let created = state.create(target, namespace, object, &options)?;
        return Ok((StatusCode::CREATED, shaped(def, &created, context.shape)));
    }
    let updated = state.update(target, namespace, name, applied, subresource, &options)?;
    Ok((StatusCode::OK, shaped(def, &updated, context.shape)))
}

pub fn delete(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let target = storage_def(state, def);
    let options = context.delete_options()?;
    let deleted = state.delete(&target, route.namespace_or_empty(), name, &options)?;
    Ok((StatusCode::OK, shaped(def, &deleted, context.shape)))
}

pub fn delete_collection(
    state: &mut State,
    route: &Route,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let def = &route.def;
    let target = storage_def(state, def);
    let selector = Selector::from_params(&context.params).map_err(ApiError::bad_request)?;
    let options = context.delete_options()?;
    let keys: Vec<(String, String)> = state
        .store
        .list(&target.storage, route.namespace.as_deref())
        .filter(|o| selector.matches(o))
        .map(|o| (meta::namespace(o).to_string(), meta::name(o).to_string()))
        .collect();
    let mut by_namespace: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (namespace, name) in keys {
        by_namespace.entry(namespace).or_default().push(name);
    }
    for (namespace, names) in by_namespace {
        for name in names {
            state.delete(&target, &namespace, &name, &options)?;
        }
    }
    Ok((StatusCode::OK, success_status()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let token = encode_continue(42, &("ns".into(), "pod-7".into()));
        assert_eq!(
            decode_continue(&token).unwrap(),
            (42, ("ns".into(), "pod-7".into()))
        );
        assert!(decode_continue("zz").is_err());
        assert!(decode_continue("abc").is_err());
    }
}
