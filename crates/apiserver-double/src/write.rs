//! Create, update and delete with the API server's semantics: generated
//! names, uids and timestamps, namespace checks, defaults and validation
//! (custom resources against their CRD schema), optimistic concurrency,
//! the status subresource, `generation`, field managers, finalizers and
//! `deletionTimestamp`, delete preconditions and propagation policies.
//!
//! HTTP handlers and the in-server controllers both write through here.

use std::sync::Arc;

use serde_json::{Value, json};

use super::State;
use super::apply::{self, Writer};
use super::builtin;
use super::error::{ApiError, Cause};
use super::meta;
use super::resources::ResourceDef;
use super::validation::Refusal;

/// Who writes and how.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// The field manager.
    pub manager: String,
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields are an error.
    pub strict: bool,
    /// Managed fields were computed by server-side apply already.
    pub applied: bool,
}

impl WriteOptions {
    /// A write by one of the in-server controllers.
    pub fn controller(manager: &str) -> Self {
        WriteOptions {
            manager: manager.to_string(),
            dry_run: false,
            strict: false,
            applied: false,
        }
    }
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// The options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// Metadata only the server writes.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
];

/// Whether `a` and `b` have the same top-level fields, leaving out those
/// `skipped` names; compared in place, since objects can be large.
fn equal_except(a: &Value, b: &Value, skipped: impl Fn(&str) -> bool) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let kept = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| !skipped(k)).count();
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !skipped(k))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// Whether everything but metadata and status (what `generation` counts)
/// is the same.
fn same_spec(a: &Value, b: &Value) -> bool {
    equal_except(a, b, |k| {
        matches!(k, "metadata" | "status" | "apiVersion" | "kind")
    })
}

/// Whether the objects are the same apart from what changes on every
/// write: a no-op.
fn same_content(a: &Value, b: &Value) -> bool {
    equal_except(a, b, |k| k == "metadata")
        && match (a.get("metadata"), b.get("metadata")) {
            (Some(x), Some(y)) => {
                equal_except(x, y, |k| matches!(k, "resourceVersion" | "managedFields"))
            }
            (x, y) => x == y,
        }
}

const NAME_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

fn writer<'a>(
    def: &'a ResourceDef,
    api_version: &'a str,
    manager: &'a str,
    subresource: &'a str,
) -> Writer<'a> {
    Writer {
        manager,
        api_version,
        subresource,
        status_is_subresource: def.status,
    }
}

/// A pseudo-random suffix for `generateName`, from the alphabet the real server uses.
fn name_suffix(serial: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = serial.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..5)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

impl State {
    /// Whether `namespace` exists and accepts new objects.
    fn check_namespace(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let storage = (String::new(), "namespaces".to_string());
        match self.store.get(&storage, "", namespace) {
            None => Err(ApiError::namespace_not_found(namespace)),
            Some(ns) if meta::is_being_deleted(ns) => Err(ApiError::forbidden(
                def,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Defaults and validates a custom resource against its CRD schema.
    fn admit_custom(
        &self,
        def: &ResourceDef,
        object: Value,
        old: Option<&Value>,
        strict: bool,
    ) -> Result<Value, ApiError> {
        let (Some(crd), true) = (&def.crd, self.options.validate_custom_resources) else {
            return Ok(object);
        };
        let name = meta::name(&object).to_string();
        crd.admit(object, old, strict)
            .map_err(|refusal| match refusal {
                Refusal::UnknownFields(fields) => {
                    let listed: Vec<String> = fields
                        .iter()
                        .map(|f| format!("unknown field {f:?}"))
                        .collect();
                    ApiError::bad_request(format!("strict decoding error: {}", listed.join(", ")))
                }
                Refusal::Invalid(causes) => ApiError::invalid(def, &name, causes),
            })
    }

    /// Creates `object` in `namespace` ("" for cluster-scoped resources).
    pub fn create(
        &mut self,
        def: &ResourceDef,
        namespace: &str,
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        object["apiVersion"] = json!(def.api_version());
        object["kind"] = json!(def.kind);
        let serial = self.store.next_serial();
        let metadata = meta::metadata_mut(&mut object);
        let given_namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if def.namespaced {
            if !given_namespace.is_empty() && given_namespace != namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            metadata.insert("namespace".into(), json!(namespace));
        } else {
            metadata.remove("namespace");
        }
        if metadata
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let prefix = metadata
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    def,
                    "",
                    vec![Cause::new(
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )],
                ));
            }
            let generated = format!("{prefix}{}", name_suffix(serial));
            metadata.insert("name".into(), json!(generated));
        }
        for field in SERVER_METADATA {
            if *field != "managedFields" || !options.applied {
                metadata.remove(*field);
            }
        }
        let name = meta::name(&object).to_string();
        let valid_name = if def.kind == "Namespace" {
            builtin::is_dns_label(&name)
        } else {
            builtin::is_dns_subdomain(&name)
        };
        if !valid_name {
            let message = if def.kind == "Namespace" {
                LABEL_MESSAGE
            } else {
                NAME_MESSAGE
            };
            return Err(ApiError::invalid(
                def,
                &name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    "metadata.name",
                    format!("Invalid value: {name:?}: {message}"),
                )],
            ));
        }
        if def.namespaced {
            self.check_namespace(def, namespace, &name)?;
        }
        if self.store.get(&def.storage, namespace, &name).is_some() {
            return Err(ApiError::already_exists(def, &name));
        }
        let uid = self.store.new_uid();
        let metadata = meta::metadata_mut(&mut object);
        metadata.insert("uid".into(), json!(uid));
        metadata.insert("creationTimestamp".into(), json!(meta::now()));
        metadata.insert("generation".into(), json!(1));
        if def.is_custom() {
            if def.status && object.get("status").is_some() {
                object.as_object_mut().map(|o| o.remove("status"));
            }
            object = self.admit_custom(def, object, None, options.strict)?;
        } else {
            builtin::default_on_create(&def.kind, &mut object, &uid, serial);
            let causes = builtin::validate(&def.kind, &object, None);
            if !causes.is_empty() {
                return Err(ApiError::invalid(def, &name, causes));
            }
        }
        if def.kind == "CustomResourceDefinition" {
            self.install_crd(def, &mut object)?;
        }
        if !options.applied {
            let api_version = def.api_version();
            apply::record_update(
                None,
                &mut object,
                &writer(def, &api_version, &options.manager, ""),
            );
        }
        if options.dry_run {
            return Ok(Arc::new(object));
        }
        Ok(self.store.put(&def.storage, object))
    }

    /// Serves a new CRD and marks it established.
    fn install_crd(&mut self, def: &ResourceDef, crd: &mut Value) -> Result<(), ApiError> {
        let name = meta::name(crd).to_string();
        self.registry.install_crd(crd).map_err(|e| {
            ApiError::invalid(def, &name, vec![Cause::new("FieldValueInvalid", "spec", e)])
        })?;
        let now = meta::now();
        let condition = |type_: &str, reason: &str| json!({"type": type_, "status": "True", "reason": reason, "message": "", "lastTransitionTime": now});
        let stored: Vec<Value> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter(|v| v["storage"] == true)
                    .map(|v| v["name"].clone())
                    .collect()
            })
            .unwrap_or_default();
        crd["status"] = json!({
            "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(json!({})),
            "conditions": [condition("NamesAccepted", "NoConflicts"), condition("Established", "InitialNamesAccepted")],
            "storedVersions": stored,
        });
        Ok(())
    }

    /// Replaces object `name` with `new` (a whole object), through the main
    /// resource (`subresource` "") or the `status` subresource.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        new: Value,
        subresource: &str,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let current = self
            .store
            .get(&def.storage, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        let given_name = meta::name(&new);
        if !given_name.is_empty() && given_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given_name}) does not match the name on the URL ({name})"
            )));
        }
        let given_version = meta::text(&new, "/metadata/resourceVersion");
        if !given_version.is_empty()
            && given_version != meta::text(&current, "/metadata/resourceVersion")
        {
            return Err(ApiError::modified(def, name));
        }
        let mut object = if subresource == "status" {
            let mut object = (*current).clone();
            match new.get("status") {
                Some(status) => object["status"] = status.clone(),
                None => {
                    object.as_object_mut().map(|o| o.remove("status"));
                }
            }
            if options.applied
                && let Some(fields) = new.pointer("/metadata/managedFields")
            {
                meta::metadata_mut(&mut object).insert("managedFields".into(), fields.clone());
            }
            object
        } else {
            let mut object = new;
            if def.status {
                match current.get("status") {
                    Some(status) => object["status"] = status.clone(),
                    None => {
                        object.as_object_mut().map(|o| o.remove("status"));
                    }
                }
            }
            let metadata = meta::metadata_mut(&mut object);
            for field in SERVER_METADATA.iter().chain(&["namespace", "name"]) {
                if *field == "managedFields" && options.applied {
                    continue;
                }
                match current.pointer(&format!("/metadata/{field}")) {
                    Some(value) => metadata.insert(field.to_string(), value.clone()),
                    None => metadata.remove(*field),
                };
            }
            object
        };
        object["apiVersion"] = json!(def.api_version());
        object["kind"] = json!(def.kind);
        if meta::is_being_deleted(&current) {
            let before = meta::finalizers(&current);
            let added: Vec<String> = meta::finalizers(&object)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    def,
                    name,
                    vec![Cause::new(
                        "FieldValueForbidden",
                        "metadata.finalizers",
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                    )],
                ));
            }
        }
        if !same_spec(&current, &object) {
            let generation = meta::int(&current, "/metadata/generation", 1) + 1;
            meta::metadata_mut(&mut object).insert("generation".into(), json!(generation));
        }
        if def.is_custom() {
            object = self.admit_custom(def, object, Some(&current), options.strict)?;
        } else {
            let causes = builtin::validate(&def.kind, &object, Some(&current));
            if !causes.is_empty() {
                return Err(ApiError::invalid(def, name, causes));
            }
        }
        if same_content(&object, &current) {
            return Ok(current);
        }
        if !options.applied {
            let api_version = def.api_version();
            apply::record_update(
                Some(&current),
                &mut object,
                &writer(def, &api_version, &options.manager, subresource),
            );
        }
        if options.dry_run {
            return Ok(Arc::new(object));
        }
        if meta::is_being_deleted(&object)
            && !meta::has_finalizers(&object)
            && !self.held_by_spec_finalizers(&object)
        {
            self.store.put(&def.storage, object);
            return Ok(self
                .store
                .remove(&def.storage, namespace, name)
                .unwrap_or(current));
        }
        Ok(self.store.put(&def.storage, object))
    }

    /// A Namespace waits for `spec.finalizers` (its contents) too.
    fn held_by_spec_finalizers(&self, object: &Value) -> bool {
        meta::text(object, "/kind") == "Namespace"
            && object
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
    }

    /// Deletes object `name`: removes it, or marks it with a
    /// `deletionTimestamp` while finalizers hold it. Returns the object as
    /// it was removed or as it is now stored.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let current = self
            .store
            .get(&def.storage, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        if let Some(uid) = &options.uid
            && uid != meta::uid(&current)
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&current)
                ),
            ));
        }
        if let Some(version) = &options.resource_version
            && version != meta::text(&current, "/metadata/resourceVersion")
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {}",
                    meta::text(&current, "/metadata/resourceVersion")
                ),
            ));
        }
        if options.dry_run {
            return Ok(current);
        }
        let mut object = (*current).clone();
        match options.propagation {
            Propagation::Orphan => self.orphan_dependents(meta::uid(&current)),
            Propagation::Foreground => {
                let mut finalizers = meta::finalizers(&object);
                if !finalizers.iter().any(|f| f == "foregroundDeletion") {
                    finalizers.push("foregroundDeletion".to_string());
                }
                meta::metadata_mut(&mut object).insert("finalizers".into(), json!(finalizers));
            }
            Propagation::Background => {}
        }
        if meta::has_finalizers(&object) || self.held_by_spec_finalizers(&object) {
            if !meta::is_being_deleted(&object) {
                let generation = meta::int(&object, "/metadata/generation", 1) + 1;
                let metadata = meta::metadata_mut(&mut object);
                metadata.insert("deletionTimestamp".into(), json!(meta::now()));
                metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
                metadata.insert("generation".into(), json!(generation));
                if def.kind == "Namespace" {
                    object["status"]["phase"] = json!("Terminating");
                }
            }
            if same_content(&object, &current) {
                return Ok(current);
            }
            return Ok(self.store.put(&def.storage, object));
        }
        if def.kind == "CustomResourceDefinition" {
            self.uninstall_crd(&object);
        }
        Ok(self
            .store
            .remove(&def.storage, namespace, name)
            .unwrap_or(current))
    }

    /// Stops serving a deleted CRD and drops its objects.
    fn uninstall_crd(&mut self, crd: &Value) {
        let group = meta::text(crd, "/spec/group").to_string();
        let plural = meta::text(crd, "/spec/names/plural").to_string();
        self.registry.remove_crd(meta::name(crd));
        let storage = (group, plural);
        let keys: Vec<(String, String)> = self
            .store
            .list(&storage, None)
            .map(|o| (meta::namespace(o).to_string(), meta::name(o).to_string()))
            .collect();
        for (namespace, name) in keys {
            self.store.remove(&storage, &namespace, &name);
        }
    }

    /// Removes the owner reference to `uid` from every dependent.
    fn orphan_dependents(&mut self, uid: &str) {
        for (storage, (namespace, name)) in self.store.dependents_of(uid) {
            let Some(def) = self.registry.by_storage(&storage) else {
                continue;
            };
            let Some(dependent) = self.store.get(&storage, &namespace, &name) else {
                continue;
            };
            let mut dependent = (**dependent).clone();
            if let Some(refs) = dependent
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| meta::text(r, "/uid") != uid);
            }
            let options = WriteOptions::controller("generic-garbage-collector");
            if let Err(e) = self.update(&def, &namespace, &name, dependent, "", &options) {
                tracing::warn!(error = %e.message, "API server double: orphaning {name} failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::name_suffix;

    #[test]
    fn generated_suffixes_differ_and_use_the_alphabet() {
        let a = name_suffix(1);
        let b = name_suffix(2);
        assert_eq!(a.len(), 5);
        assert_ne!(a, b);
        assert!(a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
