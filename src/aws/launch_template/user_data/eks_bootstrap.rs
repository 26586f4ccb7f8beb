//! AL2: a MIME archive whose last part runs `/etc/eks/bootstrap.sh` with the
//! cluster's endpoint and CA and the kubelet's flags. The user's data goes
//! first: a MIME archive's parts as given, anything else as a shell script.

use super::mime::{self, Part, SHELL_SCRIPT};
use super::{BootstrapInput, UserDataError};
use crate::aws::launch_template::IpFamily;

pub fn render(input: &BootstrapInput<'_>) -> Result<String, UserDataError> {
    let mut parts = match input.custom.filter(|c| !c.trim().is_empty()) {
        Some(custom) if mime::is_mime(custom) => mime::parse(custom)?,
        Some(custom) => vec![Part::new(SHELL_SCRIPT, custom)],
        None => Vec::new(),
    };
    parts.push(Part::new(SHELL_SCRIPT, bootstrap_script(input)));
    mime::serialize(&parts)
}

fn bootstrap_script(input: &BootstrapInput<'_>) -> String {
    let settings = input.settings;
    let mut script = String::from(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n",
    );
    // bootstrap.sh takes its options as separate words, not `--flag=value`.
    script.push_str(&format!(
        "/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}'",
        settings.cluster_name, settings.cluster_endpoint
    ));
    if let Some(ca) = settings.ca_bundle.as_deref().filter(|c| !c.is_empty()) {
        script.push_str(&format!(" --b64-cluster-ca '{ca}'"));
    }
    if settings.ip_family == IpFamily::Ipv6 {
        script.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(dns) = input.cluster_dns().first() {
        script.push_str(&format!(" \\\n--dns-cluster-ip '{dns}'"));
    }
    if input.max_pods.is_some() {
        script.push_str(" \\\n--use-max-pods false");
    }
    let args = input.kubelet_extra_args();
    if !args.is_empty() {
        script.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    }
    if input.instance_store_raid0 {
        script.push_str(" \\\n--local-disks raid0");
    }
    script
}
