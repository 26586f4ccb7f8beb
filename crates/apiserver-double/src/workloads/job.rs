//! Job → pods until enough succeed.

use serde_json::{Value, json};

use super::{create_pod, delete_pod, is_active, live, owned, pods, record, storage};
use crate::State;
use crate::meta;

const MANAGER: &str = "job-controller";

fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                matches!(meta::text(c, "/type"), "Complete" | "Failed")
                    && meta::text(c, "/status") == "True"
            })
        })
}

pub fn reconcile(state: &mut State, namespace: &str, name: &str) {
    let jobs = storage("batch", "jobs");
    let Some(job) = live(state, &jobs, namespace, name) else {
        return;
    };
    if finished(&job) {
        return;
    }
    let owned_pods = owned(state, &job, &pods());
    let active: Vec<&Value> = owned_pods
        .iter()
        .map(|p| &**p)
        .filter(|p| is_active(p))
        .collect();
    let phase_count = |phase: &str| {
        owned_pods
            .iter()
            .filter(|p| meta::text(p, "/status/phase") == phase)
            .count() as i64
    };
    let (succeeded, failed) = (phase_count("Succeeded"), phase_count("Failed"));
    let parallelism = meta::int(&job, "/spec/parallelism", 1).max(0);
    let completions = job.pointer("/spec/completions").and_then(Value::as_i64);
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let now = meta::now();
    let mut status = job
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let condition = |type_: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": message,
               "lastProbeTime": now, "lastTransitionTime": now})
    };
    let mut finish = Vec::new();
    let want = if failed > meta::int(&job, "/spec/backoffLimit", 6) {
        let message = "Job has reached the specified backoff limit";
        finish.push(condition("FailureTarget", "BackoffLimitExceeded", message));
        finish.push(condition("Failed", "BackoffLimitExceeded", message));
        0
    } else if completions.map_or(succeeded > 0 && active.is_empty(), |c| succeeded >= c) {
        finish.push(condition(
            "SuccessCriteriaMet",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        ));
        finish.push(condition(
            "Complete",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        ));
        status["completionTime"] = json!(now);
        0
    } else if suspended {
        0
    } else {
        match completions {
            Some(c) => parallelism.min(c - succeeded),
            None if succeeded > 0 => 0,
            None => parallelism,
        }
    };
    let running = active.len() as i64;
    if want > running {
        let template = job
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        for _ in running..want {
            if let Some(pod) = create_pod(state, &job, &template, None, &[], MANAGER) {
                record(
                    state,
                    &job,
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {pod}"),
                    MANAGER,
                );
            }
        }
    } else if want < running {
        let extra: Vec<String> = active
            .iter()
            .skip(want as usize)
            .map(|p| meta::name(p).to_string())
            .collect();
        for pod in extra {
            delete_pod(state, &job, &pod, MANAGER);
        }
    }
    if !suspended && status.get("startTime").is_none() {
        status["startTime"] = json!(now);
    }
    let ready = active.iter().filter(|p| meta::is_pod_ready(p)).count();
    status["active"] = json!(want);
    status["succeeded"] = json!(succeeded);
    status["failed"] = json!(failed);
    status["ready"] = json!(ready);
    status["terminating"] = json!(0);
    status["uncountedTerminatedPods"] = json!({});
    let mut updated = (*job).clone();
    updated["status"] = status;
    for c in finish {
        match meta::text(&c, "/type") {
            "Complete" => record(state, &job, "Normal", "Completed", "Job completed", MANAGER),
            "Failed" => {
                let message = meta::text(&c, "/message").to_string();
                record(
                    state,
                    &job,
                    "Warning",
                    "BackoffLimitExceeded",
                    &message,
                    MANAGER,
                );
            }
            _ => {}
        }
        meta::set_condition(&mut updated, c);
    }
    if suspended {
        meta::set_condition(
            &mut updated,
            json!({"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
                   "lastProbeTime": now, "lastTransitionTime": now}),
        );
    }
    if updated.get("status") != job.get("status") {
        state.update_quietly(&jobs, updated, "status", MANAGER);
    }
}
