#!/usr/bin/env python3
"""Writes a cluster snapshot for the disruption benchmark: one NodePool
(on-demand c/m/r, consolidateAfter 30s, a 10% budget) and its EC2NodeClass,
N initialized nodes of mixed sizes launched a week before 2026-11-26 with
their NodeClaims, and about 10 pods per node drawn so that roughly 30% of
the capacity is idle, spread unevenly (some nodes nearly full, some nearly
empty, some empty). Deterministic (SplitMix64, seed 7).

    benches/disruption-cluster.py 1000 > /tmp/disruption-1000.yaml
    benches/disruption-cluster.py 1000 --repack > /tmp/repack-1000.yaml   # lower bound
    benches/disruption-cluster.py 1000 --drifted 10 > /tmp/drift-1000.yaml  # every 10th NodeClaim drifted
    benches/disruption-cluster.py 1000 --budget 100 > /tmp/all-1000.yaml     # a 100% budget
    /usr/bin/time -f "wall=%e maxrss_kb=%M" target/release/nodewright simulate \\
        /tmp/disruption-1000.yaml --disruption --at 2026-11-26T12:00:00Z --output json \\
        | python3 -c 'import json,sys; d=json.load(sys.stdin)["disruption"]; \\
          print(len(d["decisions"]), "decisions", d["solveMillis"], "ms", \\
                d["pricePerHourBefore"], "->", d["pricePerHourAfter"])'
"""
import json
import sys

MASK = (1 << 64) - 1

# (type, cpu, memory GiB, allocatable millicores, allocatable memory GiB)
SHAPES = [
    ("m5.xlarge", 4, 16, 3920, 14),
    ("m5.2xlarge", 8, 32, 7910, 29),
    ("c5.2xlarge", 8, 16, 7910, 14),
    ("r5.xlarge", 4, 32, 3920, 29),
    ("m5.4xlarge", 16, 64, 15890, 58),
]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
POD_CPUS = [100, 250, 250, 500, 750, 1000]
POD_MEMS = [128, 256, 512, 1024, 2048]


class Rng:
    """SplitMix64."""

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


def main():
    argv = sys.argv[1:]
    # --repack: the same pods, pending, and no nodes: `simulate` on it packs
    # every pod from scratch, the lower bound the disruption pass is
    # measured against.
    repack = "--repack" in argv
    # --drifted PCT: that share of the NodeClaims carry a stale NodePool
    # hash of the current hash version, so the drift method has candidates.
    drifted = 0
    if "--drifted" in argv:
        k = argv.index("--drifted")
        drifted = int(argv[k + 1])
        del argv[k:k + 2]
    # --budget PCT: the NodePool's disruption budget (default 10%).
    budget = "10%"
    if "--budget" in argv:
        k = argv.index("--budget")
        budget = argv[k + 1] + "%"
        del argv[k:k + 2]
    args = [a for a in argv if a != "--repack"]
    n = int(args[0]) if args else 1000
    every = round(100 / drifted) if drifted else 0
    rng = Rng(7)
    out = sys.stdout
    docs = [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"disruption": {"consolidateAfter": "30s",
                                 "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                 "budgets": [{"nodes": budget}]},
                  "template": {"spec": {
                      "expireAfter": "720h",
                      "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                      "requirements": [
                          {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                          {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                          {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "KarpenterNodeRole-bench", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
    ]
    for doc in docs:
        out.write("---\n" + json.dumps(doc) + "\n")
    for i in range(n):
        name, cpu, mem, acpu, amem = rng.pick(SHAPES)
        zone = rng.pick(ZONES)
        node = f"ip-10-{i // 250}-{i % 250}-1.ec2.internal"
        provider = f"aws:///{zone}/i-{i:017x}"
        labels = {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": name,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": "on-demand",
                  "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                  "karpenter.k8s.aws/instance-category": name[0], "kubernetes.io/hostname": node}
        conditions = [{"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-11-19T12:00:00Z"}
                      for t in ("Launched", "Registered", "Initialized")]
        resources = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"}
        allocatable = {"cpu": f"{acpu}m", "memory": f"{amem}Gi", "pods": "110"}
        claim_meta = {"name": f"default-{i:05d}", "labels": labels,
                      "creationTimestamp": "2026-11-19T11:59:00Z"}
        if every and i % every == 0:
            claim_meta["annotations"] = {"karpenter.sh/nodepool-hash": "stale",
                                         "karpenter.sh/nodepool-hash-version": "nw1"}
        if not repack:
            out.write("---\n" + json.dumps({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": claim_meta,
            "spec": {"expireAfter": "720h", "requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"providerID": provider, "nodeName": node, "capacity": resources,
                       "allocatable": allocatable, "conditions": conditions,
                       "lastPodEventTime": "2026-11-19T12:00:00Z"}}) + "\n")
        if not repack:
            out.write("---\n" + json.dumps({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels},
            "spec": {"providerID": provider},
            "status": {"capacity": resources, "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}) + "\n")
        # How full this node is: uneven, ~70% on average (some empty).
        fill = rng.pick([0.0, 0.35, 0.6, 0.8, 0.9, 0.95, 0.95, 0.95])
        used = 0
        j = 0
        while j < 20:
            pcpu = rng.pick(POD_CPUS)
            pmem = rng.pick(POD_MEMS)
            if used + pcpu > fill * acpu:
                break
            used += pcpu
            spec = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": f"{pcpu}m", "memory": f"{pmem}Mi"}}}]}
            if not repack:
                spec["nodeName"] = node
            out.write("---\n" + json.dumps({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"app-{i}-{j}", "namespace": "default", "labels": {"app": f"app-{i % 50}"}},
                "spec": spec,
                "status": {"phase": "Running" if not repack else "Pending"}}) + "\n")
            j += 1


if __name__ == "__main__":
    main()
