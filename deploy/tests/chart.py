"""Renders the chart with the real Helm library (helm-python-sdk).

As a module: `render(sets)` and friends for the checks. As a script:
`python chart.py [--set k=v]... [--namespace NS]` prints the rendered
manifests (without NOTES.txt) as one YAML stream, for `kubectl apply -f -`.
"""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "nodewright"

# helm_python finds its shared library relative to the working directory's
# view of the package: import it from somewhere other than the wheel's
# directory.
os.chdir(ROOT)
import helm_python  # noqa: E402

RELEASE = "nodewright"
NAMESPACE = "kube-system"

# What the chart needs beyond Karpenter's getting-started values: no image
# is published, so where the user pushed one.
REQUIRED = [
    "controller.image.repository=111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright",
]

# The endpoint nodes join, when given rather than asked of EKS.
ENDPOINT = "settings.clusterEndpoint=https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"

# Karpenter's getting-started `helm upgrade --install` (step08), verbatim
# but for the variables' values.
KARPENTER_GETTING_STARTED = [
    "settings.clusterName=demo",
    "settings.interruptionQueue=demo",
    "settings.enableZonalShift=false",
    "controller.resources.requests.cpu=1",
    "controller.resources.requests.memory=1Gi",
    "controller.resources.limits.cpu=1",
    "controller.resources.limits.memory=1Gi",
]


def merge(into, values):
    """Merges `values` into `into` the way repeated --set flags do."""
    for key, value in values.items():
        before = into.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            merge(before, value)
        elif isinstance(value, list) and isinstance(before, list):
            # `a[1].b=…` after `a[0].c=…`: Helm fills the list by index.
            for i, item in enumerate(value):
                if i >= len(before):
                    before.append(item)
                elif isinstance(item, dict) and isinstance(before[i], dict):
                    merge(before[i], item)
                elif item is not None:
                    before[i] = item
        else:
            into[key] = value
    return into


def values_of(sets):
    """The values a list of `--set` expressions gives, parsed by Helm."""
    values = {}
    for expression in sets:
        merge(values, helm_python.parse_set_string(expression))
    return values


def render(sets, namespace=NAMESPACE, name=RELEASE):
    """Renders the chart with `--set` expressions; returns {path: manifest}."""
    chart = helm_python.Chart.load(str(CHART))
    try:
        return chart.render(values_of(sets), name=name, namespace=namespace)
    finally:
        chart.close()


def stream(rendered):
    """The rendered manifests as one YAML stream, NOTES.txt left out."""
    return "\n---\n".join(
        text.strip()
        for path, text in sorted(rendered.items())
        if not path.endswith("NOTES.txt") and text.strip()
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument("--namespace", default=NAMESPACE)
    args = parser.parse_args()
    sys.stdout.write(stream(render(args.sets, namespace=args.namespace)) + "\n")


if __name__ == "__main__":
    main()
