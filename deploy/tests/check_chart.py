"""Checks the Helm chart with the real Helm library and Kubernetes' schemas.

Each check prints one line; any failure exits non-zero with what failed.
"""

import sys
import time

import kubernetes_validate
import yaml

import chart
from chart import ENDPOINT, KARPENTER_GETTING_STARTED, REQUIRED, helm_python

KUBERNETES_VERSIONS = ["1.29", "1.30", "1.31", "1.32", "1.33"]

# Everything the chart can switch on, away from its defaults.
NON_DEFAULT = REQUIRED + [
    ENDPOINT,
    "settings.clusterName=prod-east",
    "settings.clusterCABundle=LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    "settings.batchMaxDuration=30s",
    "settings.batchIdleDuration=2s",
    "settings.preferencePolicy=Ignore",
    "settings.minValuesPolicy=BestEffort",
    "settings.disableDryRun=true",
    "settings.featureGates.nodeRepair=true",
    "settings.featureGates.nodeOverlay=true",
    "settings.featureGates.staticCapacity=true",
    "settings.extensions.timeout=250ms",
    "settings.extensions.memoryMiB=128",
    "settings.extensions.cacheEntries=512",
    "settings.extensions.concurrency=2",
    "settings.extensions.moduleCache.enabled=true",
    "settings.extensions.plainHTTPRegistries={registry.kube-system:5000,localhost}",
    "settings.extensions.registryCredentialsSecret=registry-credentials",
    "settings.extensions.moduleSignatureKeys=module-signature-keys",
    "controller.image.tag=0.1.0",
    "controller.image.digest=sha256:" + "ab" * 32,
    "controller.metrics.port=9090",
    "controller.healthProbe.port=9091",
    "controller.env[0].name=AWS_REGION",
    "controller.env[0].value=eu-west-1",
    "controller.extraVolumeMounts[0].name=scratch",
    "controller.extraVolumeMounts[0].mountPath=/scratch",
    "extraVolumes[0].name=scratch",
    "extraVolumes[0].emptyDir.medium=Memory",
    "replicas=3",
    "logLevel=debug",
    "fullnameOverride=nw",
    "serviceAccount.create=false",
    "serviceAccount.name=existing",
    "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::111122223333:role/nw",
    "serviceMonitor.enabled=true",
    "serviceMonitor.additionalLabels.release=prometheus",
    "serviceMonitor.sampleLimit=5000",
    "podDisruptionBudget.name=nw",
    "podDisruptionBudget.maxUnavailable=2",
    "additionalLabels.team=platform",
    "additionalAnnotations.owner=platform",
    "podLabels.tier=control",
    "podAnnotations.checked=yes",
    "priorityClassName=",
    "terminationGracePeriodSeconds=60",
    "tolerations=null",
    "additionalClusterRoleRules[0].apiGroups={}",
    "additionalClusterRoleRules[0].resources={secrets}",
    "additionalClusterRoleRules[0].verbs={get}",
]

failures = []


def check(name, fn):
    started = time.monotonic()
    try:
        detail = fn()
    except Exception as error:  # a check's failure, reported with its cause
        failures.append(name)
        print(f"FAIL {name}: {error}")
        return
    print(f"ok   {name} ({time.monotonic() - started:.1f}s){': ' + detail if detail else ''}")


def objects(sets):
    rendered = chart.render(sets)
    return [doc for doc in yaml.safe_load_all(chart.stream(rendered)) if doc]


def find(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


def env(deployment):
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def expect(actual, wanted, what):
    if actual != wanted:
        raise AssertionError(f"{what}: wanted {wanted!r}, got {actual!r}")


def validate(docs):
    """Every object against Kubernetes' OpenAPI schemas, strict, per version."""
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            # Not a Kubernetes kind: no schema ships with kubernetes-validate.
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                raise AssertionError(
                    f"{doc['kind']} {doc['metadata']['name']} on Kubernetes {version}: {error.message}"
                ) from None
            checked += 1
    return checked


def lint():
    # The three value sets the renders below use: the defaults, Karpenter's
    # getting-started values, and every setting moved off its default.
    found = []
    for name, sets in [
        ("defaults", ["settings.clusterName=demo"] + REQUIRED),
        ("getting started", KARPENTER_GETTING_STARTED + REQUIRED),
        ("non-default", NON_DEFAULT),
    ]:
        values = chart.values_of(sets)
        report = helm_python.lint(str(chart.CHART), values, strict=True, namespace=chart.NAMESPACE)
        # Helm's severities: 1 info, 2 warning, 3 error.
        bad = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        if bad:
            raise AssertionError(f"helm lint with the {name} values: {bad}")
        notes = "; ".join(f"{m['path']}: {m['error']}" for m in report["messages"])
        found.append(f"{name}: {notes or 'clean'}")
    return "; ".join(found)


def defaults():
    docs = objects(["settings.clusterName=demo"] + REQUIRED)
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    deployment = find(docs, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    expect(spec["replicas"], 2, "replicas")
    variables = env(deployment)
    expect(variables["LEADER_ELECT"], "true", "leader election")
    expect(variables["LOG_FORMAT"], "json", "log format")
    expect(variables["CLUSTER_NAME"], "demo", "CLUSTER_NAME")
    expect(
        variables["FEATURE_GATES"],
        "ReservedCapacity=true,NodeRepair=false,SpotToSpotConsolidation=false,"
        "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
        "FEATURE_GATES",
    )
    if any("nodeoverlays" in rule.get("resources", []) for rule in find(docs, "ClusterRole", "nodewright")["rules"]):
        raise AssertionError("nodeoverlays RBAC without settings.featureGates.nodeOverlay")
    expect("INTERRUPTION_QUEUE" in variables, False, "no interruption queue by default")
    expect("CLUSTER_ENDPOINT" in variables, False, "the endpoint asked of EKS by default")
    security = container["securityContext"]
    expect(security["runAsNonRoot"], True, "runAsNonRoot")
    expect(security["readOnlyRootFilesystem"], True, "readOnlyRootFilesystem")
    expect(security["allowPrivilegeEscalation"], False, "allowPrivilegeEscalation")
    expect(security["capabilities"], {"drop": ["ALL"]}, "capabilities")
    expect(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"}, "seccomp")
    expect(container["livenessProbe"]["httpGet"]["path"], "/healthz", "liveness probe")
    expect(container["readinessProbe"]["httpGet"]["path"], "/readyz", "readiness probe")
    expect(
        [p["containerPort"] for p in container["ports"]], [8080, 8081], "metrics and health ports"
    )
    spread = pod["topologySpreadConstraints"][0]
    expect(spread["topologyKey"], "topology.kubernetes.io/zone", "zone spread")
    expect(
        spread["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"],
        "nodewright",
        "spread selects the controller's pods",
    )
    expect(container["image"], REQUIRED[0].split("=", 1)[1] + ":0.1.0", "image")
    lease_role = find(docs, "Role", "nodewright")
    expect(
        lease_role["rules"][0]["resourceNames"],
        [variables["LEADER_ELECTION_NAME"]],
        "the Lease rule names the controller's Lease",
    )
    if any(d["kind"] == "ServiceMonitor" for d in docs):
        raise AssertionError("a ServiceMonitor without serviceMonitor.enabled")
    return f"{len(docs)} objects ({', '.join(kinds)}); {validate(docs)} validations"


def getting_started():
    # Karpenter's command as it is: refused, naming the one value nodewright
    # needs beyond it (where its image was pushed).
    try:
        chart.render(KARPENTER_GETTING_STARTED)
    except helm_python.HelmError as error:
        if "controller.image.repository is required" not in str(error):
            raise AssertionError(f"without the image repository: {error}") from None
    else:
        raise AssertionError("rendered without controller.image.repository")
    docs = objects(KARPENTER_GETTING_STARTED + REQUIRED)
    deployment = find(docs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    expect(
        container["resources"],
        {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": 1, "memory": "1Gi"}},
        "resources",
    )
    expect(env(deployment)["INTERRUPTION_QUEUE"], "demo", "INTERRUPTION_QUEUE")
    expect("CLUSTER_ENDPOINT" in env(deployment), False, "the endpoint asked of EKS")
    notes = chart.render(KARPENTER_GETTING_STARTED + REQUIRED)["nodewright/templates/NOTES.txt"]
    if "read from the SQS queue demo" not in notes:
        raise AssertionError(f"NOTES.txt does not name the interruption queue: {notes}")
    return f"{len(docs)} objects; {validate(docs)} validations"


def non_default():
    docs = objects(NON_DEFAULT)
    deployment = find(docs, "Deployment", "nw")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    variables = env(deployment)
    wanted = {
        "CLUSTER_NAME": "prod-east",
        "CLUSTER_ENDPOINT": ENDPOINT.split("=", 1)[1],
        "CLUSTER_CA_BUNDLE": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
        "BATCH_MAX_DURATION": "30s",
        "BATCH_IDLE_DURATION": "2s",
        "PREFERENCE_POLICY": "Ignore",
        "MIN_VALUES_POLICY": "BestEffort",
        "DISABLE_DRY_RUN": "true",
        "LOG_LEVEL": "debug",
        "METRICS_PORT": "9090",
        "HEALTH_PROBE_PORT": "9091",
        "EXTENSION_TIMEOUT": "250ms",
        "EXTENSION_MEMORY_MIB": "128",
        "EXTENSION_CACHE_ENTRIES": "512",
        "EXTENSION_CONCURRENCY": "2",
        "NODEWRIGHT_EXTENSION_CACHE_DIR": "/var/cache/nodewright",
        "NODEWRIGHT_REGISTRY_CONFIG": "/etc/nodewright/registry/.dockerconfigjson",
        "NODEWRIGHT_MODULE_SIGNATURE_KEYS": "/etc/nodewright/module-signature-keys",
        "AWS_REGION": "eu-west-1",
        "LEADER_ELECTION_NAME": "nw-leader-election",
    }
    for key, value in wanted.items():
        expect(variables.get(key), value, key)
    for gate in ["NodeRepair=true", "NodeOverlay=true", "StaticCapacity=true"]:
        if gate not in variables["FEATURE_GATES"]:
            raise AssertionError(f"FEATURE_GATES: {variables['FEATURE_GATES']}")
    expect(
        container["args"],
        ["controller", "--plain-http-registry=registry.kube-system:5000", "--plain-http-registry=localhost"],
        "args",
    )
    expect(container["image"], REQUIRED[0].split("=", 1)[1] + ":0.1.0@sha256:" + "ab" * 32, "image")
    expect(
        [m["mountPath"] for m in container["volumeMounts"]],
        ["/var/cache/nodewright", "/etc/nodewright/registry", "/etc/nodewright/module-signature-keys", "/scratch"],
        "volume mounts",
    )
    keys_volume = next(v for v in pod["volumes"] if v["name"] == "module-signature-keys")
    expect(keys_volume["configMap"]["name"], "module-signature-keys", "module signature keys ConfigMap")
    expect(pod["serviceAccountName"], "existing", "serviceAccountName")
    expect(deployment["spec"]["replicas"], 3, "replicas")
    expect("priorityClassName" in pod, False, "no priority class")
    expect("tolerations" in pod, False, "no tolerations")
    expect(pod["terminationGracePeriodSeconds"], 60, "terminationGracePeriodSeconds")
    if any(d["kind"] == "ServiceAccount" for d in docs):
        raise AssertionError("a ServiceAccount with serviceAccount.create=false")
    monitor = find(docs, "ServiceMonitor")
    expect(monitor["spec"]["sampleLimit"], 5000, "sampleLimit")
    expect(monitor["metadata"]["labels"]["release"], "prometheus", "ServiceMonitor label")
    expect(find(docs, "PodDisruptionBudget", "nw")["spec"]["maxUnavailable"], 2, "PDB")
    rules = find(docs, "ClusterRole", "nw")["rules"]
    expect(rules[-1], {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "additional rule")
    # The NodeOverlay gate brings the NodeOverlay controller's rules.
    for resources, verbs in [(["nodeoverlays"], ["list", "watch"]), (["nodeoverlays/status"], ["patch"])]:
        wanted_rule = {"apiGroups": ["karpenter.sh"], "resources": resources, "verbs": verbs}
        if wanted_rule not in rules:
            raise AssertionError(f"no rule {wanted_rule} with settings.featureGates.nodeOverlay=true")
    for doc in docs:
        expect(doc["metadata"]["labels"].get("team"), "platform", f"{doc['kind']} label")
        expect(doc["metadata"].get("annotations", {}).get("owner"), "platform", f"{doc['kind']} annotation")
    return f"{len(docs)} objects; {validate(docs)} validations"


def refusals():
    """Unknown keys and Karpenter keys nodewright does not do are refused by
    the schema, naming the key."""
    cases = {
        "settings.clusterNmae=typo": "clusterNmae",
        "unknownTopLevel=1": "unknownTopLevel",
        "settings.isolatedVPC=true": "/settings/isolatedVPC",
        "settings.enableZonalShift=true": "/settings/enableZonalShift",
        "settings.featureGates.capacityBuffer=true": "/settings/featureGates/capacityBuffer",
        "settings.featureGates.reservedCapacity=false": "/settings/featureGates/reservedCapacity",
        "settings.amiRefreshInterval=5m": "amiRefreshInterval",
        "logErrorOutputPaths={stderr}": "logErrorOutputPaths",
        "settings.extensions.memoryMiB=4096": "/settings/extensions/memoryMiB",
        "settings.batchMaxDuration=ten seconds": "/settings/batchMaxDuration",
    }
    said = []
    for expression, named in cases.items():
        try:
            chart.render(REQUIRED + ["settings.clusterName=demo", expression])
        except helm_python.HelmError as error:
            if named not in str(error) or "schema" not in str(error):
                raise AssertionError(f"{expression}: the refusal does not name {named}: {error}") from None
            said.append(str(error).strip().splitlines()[-1].strip())
        else:
            raise AssertionError(f"{expression} was accepted")
    return f"{len(cases)} refused, e.g. {said[0]!r}"


def main():
    check("helm lint (strict)", lint)
    check("render: default values", defaults)
    check("render: Karpenter's getting-started values", getting_started)
    check("render: every setting away from its default", non_default)
    check("values.schema.json refuses unknown and unsupported keys", refusals)
    if failures:
        print(f"chart: {len(failures)} check(s) failed: {', '.join(failures)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
