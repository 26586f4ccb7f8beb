#!/usr/bin/env python3
"""Writes the scheduling benchmark's diverse workload as manifests for
`nodewright simulate`: one NodePool with no requirements beyond the defaults
and no limits, its EC2NodeClass, and N pods drawn exactly as
`make_diverse_pods(N)` in benches/scheduling.rs draws them (the same
SplitMix64 stream, seed 42): n/5 generic, zone-spread, hostname-spread,
zone-affinity and hostname-anti-affinity pods, the remainder generic.

    benches/diverse-workload.py 20000 > /tmp/diverse-20000.yaml
    /usr/bin/time -f "wall=%e maxrss_kb=%M" target/release/nodewright simulate /tmp/diverse-20000.yaml

The solve runs on the embedded catalog of the class's region (us-east-1).
"""

import json
import sys

MASK = (1 << 64) - 1
SEED = 42
MIB = 1 << 20
GIB = 1 << 30
LABEL_VALUES = ["a", "b", "c", "d", "e", "f", "g"]
CPUS = [100, 250, 500, 1000, 1500]
MEMORIES = [100 * MIB, 256 * MIB, 512 * MIB, GIB, 2 * GIB, 4 * GIB]


class Rng:
    """SplitMix64, as the Rust benchmark's `Rng`."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def pick(self, items):
        return items[self.next() % len(items)]


def pod(rng, name, labels):
    cpu, memory = rng.pick(CPUS), rng.pick(MEMORIES)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": f"{cpu}m", "memory": str(memory)}},
            }],
        },
    }


def generic(rng, n, tag):
    out = []
    for i in range(n):
        label = rng.pick(LABEL_VALUES)
        out.append(pod(rng, f"{tag}-{i}", {"my-label": label}))
    return out


def spread(rng, n, key, tag):
    out = []
    for i in range(n):
        selector_value = rng.pick(LABEL_VALUES)
        own_value = rng.pick(LABEL_VALUES)
        p = pod(rng, f"{tag}-{i}", {"my-label": own_value})
        p["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"my-label": selector_value}},
        }]
        out.append(p)
    return out


def affinity(rng, n):
    out = []
    for i in range(n):
        value = rng.pick(LABEL_VALUES)
        p = pod(rng, f"affinity-{i}", {"my-affininity": value})
        p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"my-affininity": value}},
            "topologyKey": "topology.kubernetes.io/zone",
        }]}}
        out.append(p)
    return out


def anti_affinity(rng, n):
    out = []
    for i in range(n):
        p = pod(rng, f"anti-{i}", {"app": "nginx"})
        p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "nginx"}},
            "topologyKey": "kubernetes.io/hostname",
        }]}}
        out.append(p)
    return out


def diverse_pods(n):
    rng = Rng(SEED)
    fifth = n // 5
    pods = generic(rng, fifth, "generic")
    pods += spread(rng, fifth, "topology.kubernetes.io/zone", "zone-spread")
    pods += spread(rng, fifth, "kubernetes.io/hostname", "host-spread")
    pods += affinity(rng, fifth)
    pods += anti_affinity(rng, fifth)
    pods += generic(rng, n - len(pods), "filler")
    return pods


POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {"template": {"spec": {
        "requirements": [],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }}},
}

CLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-bench",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
    },
}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    out = sys.stdout
    for document in [POOL, CLASS] + diverse_pods(n):
        out.write("---\n")
        # JSON is YAML: one line per document keeps the file quick to write.
        out.write(json.dumps(document))
        out.write("\n")


if __name__ == "__main__":
    main()
