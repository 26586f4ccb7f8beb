//! The `scale` subresource (Deployments, ReplicaSets, StatefulSets,
//! NodePools — any resource whose definition names replica paths) and
//! `pods/binding`.

use http::StatusCode;
use serde_json::{Value, json};

use super::State;
use super::error::{ApiError, success_status};
use super::jsonpath;
use super::meta;
use super::path::Route;
use super::request::Context;
use super::selector::LabelSelector;
use super::verbs::apply_patch;

/// The `autoscaling/v1` Scale of an object.
fn scale_of(route: &Route, object: &Value) -> Result<Value, ApiError> {
    let paths = route.def.scale.as_ref().ok_or_else(ApiError::no_route)?;
    let replicas = |path: &str| {
        jsonpath::first(object, path)
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let selector = match &paths.label_selector {
        Some(path) => jsonpath::first(object, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => LabelSelector::from_object(object.pointer("/spec/selector"))
            .map(|s| s.to_string_form())
            .unwrap_or_default(),
    };
    let mut metadata = json!({
        "name": meta::name(object),
        "uid": meta::uid(object),
        "resourceVersion": meta::text(object, "/metadata/resourceVersion"),
        "creationTimestamp": meta::text(object, "/metadata/creationTimestamp"),
    });
    if route.def.namespaced {
        metadata["namespace"] = json!(meta::namespace(object));
    }
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    Ok(json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": status,
    }))
}

fn current(state: &State, route: &Route, name: &str) -> Result<Value, ApiError> {
    state
        .store
        .get(&route.def.storage, route.namespace_or_empty(), name)
        .map(|o| (**o).clone())
        .ok_or_else(|| ApiError::not_found(&route.def, name))
}

pub fn get_scale(
    state: &State,
    route: &Route,
    name: &str,
) -> Result<(StatusCode, Value), ApiError> {
    let object = current(state, route, name)?;
    Ok((StatusCode::OK, scale_of(route, &object)?))
}

/// Writes the replicas of a new Scale into the object.
fn write_scale(
    state: &mut State,
    route: &Route,
    name: &str,
    scale: &Value,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let mut object = current(state, route, name)?;
    let given = meta::text(scale, "/metadata/resourceVersion");
    if !given.is_empty() && given != meta::text(&object, "/metadata/resourceVersion") {
        return Err(ApiError::modified(&route.def, name));
    }
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::invalid(
                &route.def,
                name,
                vec![super::error::Cause::new(
                    "FieldValueInvalid",
                    "spec.replicas",
                    "Invalid value: must be greater than or equal to 0",
                )],
            )
        })?;
    let paths = route.def.scale.clone().ok_or_else(ApiError::no_route)?;
    jsonpath::set(&mut object, &paths.spec_replicas, json!(replicas))
        .map_err(ApiError::bad_request)?;
    let def = route.def.clone();
    let updated = state.update(
        &def,
        route.namespace_or_empty(),
        name,
        object,
        "",
        &context.write_options(),
    )?;
    Ok((StatusCode::OK, scale_of(route, &updated)?))
}

pub fn replace_scale(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let scale = context.body_json()?;
    write_scale(state, route, name, &scale, context)
}

pub fn patch_scale(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let object = current(state, route, name)?;
    let scale = scale_of(route, &object)?;
    let document = context.body_json()?;
    let patched = if context.content_type.starts_with("application/apply-patch") {
        let mut patched = scale.clone();
        super::patch::merge(&mut patched, &document);
        patched
    } else {
        // Scale is a built-in kind: strategic merge patches apply to it.
        let builtin = state
            .registry
            .lookup("apps", "v1", "deployments")
            .ok_or_else(ApiError::no_route)?;
        apply_patch(&builtin, &scale, &context.content_type, &document)?
    };
    write_scale(state, route, name, &patched, context)
}

/// `POST pods/{name}/binding`: sets `spec.nodeName` (once) and `PodScheduled`.
pub fn bind(
    state: &mut State,
    route: &Route,
    name: &str,
    context: &Context,
) -> Result<(StatusCode, Value), ApiError> {
    let binding = context.body_json()?;
    let node = meta::text(&binding, "/target/name").to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            &route.def,
            name,
            vec![super::error::Cause::new(
                "FieldValueRequired",
                "target.name",
                "Required value",
            )],
        ));
    }
    let mut pod = current(state, route, name)?;
    if meta::is_being_deleted(&pod) {
        return Err(ApiError::conflict(
            &route.def,
            name,
            "pod is being deleted, cannot be assigned to a host",
        ));
    }
    let bound = meta::text(&pod, "/spec/nodeName").to_string();
    if !bound.is_empty() {
        return Err(ApiError::conflict(
            &route.def,
            name,
            &format!("pod {name} is already assigned to node {bound:?}"),
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Some(annotations) = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let target = meta::metadata_mut(&mut pod)
            .entry("annotations")
            .or_insert_with(|| json!({}));
        if let Some(target) = target.as_object_mut() {
            target.extend(annotations.clone());
        }
    }
    meta::set_condition(
        &mut pod,
        json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now()}),
    );
    let def = route.def.clone();
    let namespace = route.namespace_or_empty().to_string();
    let options = context.write_options();
    // The binding writes spec and status together, as the real registry does.
    let with_spec = state.update(&def, &namespace, name, pod.clone(), "", &options)?;
    let mut with_status = (*with_spec).clone();
    with_status["status"] = pod["status"].clone();
    state.update(&def, &namespace, name, with_status, "status", &options)?;
    Ok((StatusCode::CREATED, success_status()))
}
