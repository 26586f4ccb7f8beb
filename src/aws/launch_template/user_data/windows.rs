//! Windows: one `<powershell>` block. The user's script runs first, then
//! `Start-EKSBootstrap.ps1` with the cluster's endpoint and CA and the
//! kubelet's flags.

use super::BootstrapInput;

pub fn render(input: &BootstrapInput<'_>) -> String {
    let settings = input.settings;
    let mut script = String::from("<powershell>\n");
    if let Some(custom) = input.custom.filter(|c| !c.is_empty()) {
        script.push_str(custom);
        script.push('\n');
    }
    script.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    script.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}'",
        settings.cluster_name, settings.cluster_endpoint
    ));
    if let Some(ca) = settings.ca_bundle.as_deref().filter(|c| !c.is_empty()) {
        script.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    let args = input.kubelet_extra_args();
    if !args.is_empty() {
        script.push_str(&format!(" -KubeletExtraArgs '{}'", args.join(" ")));
    }
    if let Some(dns) = input.cluster_dns().first() {
        script.push_str(&format!(" -DNSClusterIP '{dns}'"));
    }
    script.push_str("\n</powershell>");
    script
}
