"""Checks deploy/iam/controller-policy.json against the code and parliament.

- Every EC2, SSM, IAM, Pricing and SQS operation the controller's code calls
  (collected from src/ and crates/interruption-queue/src/, not listed by hand) is an action the policy allows,
  and every action the policy allows is one the code calls or one AWS
  requires for a call the code makes (IMPLIED below, each with its reason).
- parliament (IAM policy linter) reports nothing above LOW, except findings
  deploy/iam/README.md justifies in its "parliament findings" table.
- The CloudFormation template's controller policy is this policy, and its
  node role's trust policy is deploy/iam/node-trust-policy.json.
- Every tag condition in the policy (`aws:RequestTag/K`, `aws:ResourceTag/K`)
  holds for the tags the code writes (read from the functions that build
  them, TAG_WRITERS below), and every EC2 resource type a statement only
  lets the controller create with request tags is one the code tags. moto
  evaluates no condition (tests/it/sandbox_aws_iam.rs says what it checks),
  so this is what stands between a tag the code stops writing and a launch
  AWS refuses.

Operations are found as `.operation_name()` calls whose name is an operation
of one of the AWS SDK crates in Cargo.lock (read from the crates' sources in
Cargo's registry). Code under src/sim (the sandbox) and unit tests (after a
file's `#[cfg(test)]`, `testing` modules) are not the controller's.
"""

import json
import os
import re
import sys
from pathlib import Path

import parliament
import yaml

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "deploy" / "iam" / "controller-policy.json"
README = ROOT / "deploy" / "iam" / "README.md"
TEMPLATE = ROOT / "deploy" / "cloudformation" / "nodewright.yaml"
SERVICES = {"ec2": "ec2", "eks": "eks", "ssm": "ssm", "iam": "iam", "pricing": "pricing", "sqs": "sqs"}

# Actions AWS checks for a call besides the call's own action.
IMPLIED = {
    "ec2:CreateFleet": {
        "ec2:RunInstances": "an instant fleet launches with RunInstances permission",
        "ec2:CreateTags": "the fleet's TagSpecifications tag what it creates",
        "iam:PassRole": "the launch template's instance profile passes the node role",
    },
    "ec2:RunInstances": {
        "ec2:CreateTags": "TagSpecifications tag the instance and volumes",
        "iam:PassRole": "the instance profile passes the node role",
    },
    "ec2:CreateLaunchTemplate": {
        "ec2:CreateTags": "the template is tagged as it is created",
    },
    "iam:CreateInstanceProfile": {
        "iam:TagInstanceProfile": "the profile is tagged as it is created",
    },
    "iam:AddRoleToInstanceProfile": {
        "iam:PassRole": "adding a role to a profile passes it",
    },
}

# Values for the policy's placeholders (CloudFormation's !Sub names), for
# parliament, which checks ARNs.
EXAMPLE = {
    "${AWS::Partition}": "aws",
    "${AWS::Region}": "us-east-1",
    "${AWS::AccountId}": "111122223333",
    "${ClusterName}": "demo",
    "${NodeRoleArn}": "arn:aws:iam::111122223333:role/NodewrightNode-demo",
}


def sdk_operations():
    """{service: {operation_name}} from the SDK crates Cargo.lock pins."""
    lock = (ROOT / "Cargo.lock").read_text()
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    operations = {}
    for crate, version in re.findall(r'name = "aws-sdk-([a-z0-9]+)"\nversion = "([^"]+)"', lock):
        if crate not in SERVICES:
            continue
        found = list(cargo_home.glob(f"registry/src/*/aws-sdk-{crate}-{version}/src/operation"))
        if not found:
            raise SystemExit(f"aws-sdk-{crate} {version} is not in {cargo_home}/registry: run cargo fetch")
        operations[crate] = {p.name for p in found[0].iterdir() if p.is_dir()}
    return operations


# Workspace crates the controller links whose AWS calls it makes.
CONTROLLER_CRATES = ["src", "crates/interruption-queue/src"]

# IAM actions of SDK operations that IAM does not name after themselves.
ACTION_OF = {"sqs:DeleteMessageBatch": "sqs:DeleteMessage"}


def controller_sources():
    for path in sorted(p for root in CONTROLLER_CRATES for p in (ROOT / root).rglob("*.rs")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("src/sim/") or "/testing" in relative or path.name.endswith("tests.rs"):
            continue
        text = path.read_text()
        yield relative, text.split("#[cfg(test)]", 1)[0]


def pascal(name):
    return "".join(part.capitalize() for part in name.split("_"))


def called_actions():
    """{action: [where]} for every SDK operation the controller calls."""
    operations = sdk_operations()
    actions = {}
    for relative, text in controller_sources():
        for number, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"\.([a-z][a-z0-9_]*)\(\)", line):
                services = [s for s, ops in operations.items() if name in ops]
                if len(services) > 1:
                    raise SystemExit(f"{relative}:{number}: .{name}() is an operation of {services}: which?")
                if services:
                    action = f"{SERVICES[services[0]]}:{pascal(name)}"
                    action = ACTION_OF.get(action, action)
                    actions.setdefault(action, []).append(f"{relative}:{number}")
    return actions


def policy_actions(policy):
    allowed = set()
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow":
            continue
        action = statement["Action"]
        allowed.update([action] if isinstance(action, str) else action)
    return allowed


def coverage(policy):
    called = called_actions()
    if not called:
        raise SystemExit("no AWS SDK call found in src/: the scan is broken")
    needed = dict.fromkeys(called, "called")
    for action in called:
        for implied, why in IMPLIED.get(action, {}).items():
            needed.setdefault(implied, f"implied by {action}: {why}")
    allowed = policy_actions(policy)
    problems = []
    for action in sorted(set(needed) - allowed):
        where = ", ".join(called.get(action, [])) or needed[action]
        problems.append(f"{action} is not allowed ({where})")
    for action in sorted(allowed - set(needed)):
        problems.append(f"{action} is allowed but the controller never calls it")
    for action in sorted(needed):
        print(f"     {action}: {', '.join(called[action]) if action in called else needed[action]}")
    return problems, len(called), len(needed)


def justified():
    """{(sid, issue)} from the README's parliament findings table."""
    rows = re.findall(r"^\| `([A-Za-z0-9]+)` \| `([A-Z_]+)` \|", README.read_text(), re.M)
    return set(rows)


def parliament_findings(text):
    concrete = text
    for placeholder, value in EXAMPLE.items():
        concrete = concrete.replace(placeholder, value)
    if "${" in concrete:
        raise SystemExit(f"unknown placeholder in the policy: {re.findall(r'[$][{][^}]+[}]', concrete)}")
    lines = concrete.splitlines()
    found = set()
    problems = []
    for finding in parliament.analyze_policy_string(concrete).findings:
        severity = parliament.config.get(finding.issue, {}).get("severity", "UNKNOWN")
        line = finding.location.get("line") or 1
        sid = next((m.group(1) for l in lines[line - 1:] for m in [re.search(r'"Sid": "([^"]+)"', l)] if m), "?")
        found.add((sid, finding.issue))
        print(f"     parliament {severity} {finding.issue} in {sid}: {finding.detail}")
        if severity not in ("LOW", "INFO") and (sid, finding.issue) not in justified():
            problems.append(f"parliament {severity} {finding.issue} in {sid}, not justified in deploy/iam/README.md")
    for sid, issue in sorted(justified() - found):
        problems.append(f"deploy/iam/README.md justifies {issue} in {sid}, which parliament no longer reports")
    return problems


class CloudFormation(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags as plain data."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {suffix: value}


CloudFormation.add_multi_constructor("!", _tag)


def template_policy_matches(policy):
    if not TEMPLATE.exists():
        return [f"{TEMPLATE.relative_to(ROOT)} is missing"]
    template = yaml.load(TEMPLATE.read_text(), Loader=CloudFormation)
    document = template["Resources"]["ControllerPolicy"]["Properties"]["PolicyDocument"]
    body = document["Sub"]
    if isinstance(body, list):  # [text, {NodeRoleArn: ...}]
        body = body[0]
    problems = []
    if json.loads(body) != policy:
        problems.append("the CloudFormation template's ControllerPolicy is not deploy/iam/controller-policy.json")
    trust = json.loads((ROOT / "deploy" / "iam" / "node-trust-policy.json").read_text())
    if template["Resources"]["NodeRole"]["Properties"]["AssumeRolePolicyDocument"] != trust:
        problems.append("the CloudFormation template's NodeRole trusts otherwise than deploy/iam/node-trust-policy.json")
    return problems


# The functions that build the tags nodewright writes, and what carries them:
# (file, function, resources tagged, when the tags are checked). EC2
# launches carry template_tags (launch templates, and CreateFleet's tag
# specifications with the NodeClaim's tag added); the class's dry runs carry
# launch_tags; instance profiles carry instance_profile_tags.
TAG_WRITERS = [
    ("src/aws/cloudprovider.rs", "template_tags", "ec2", ("RequestTag", "ResourceTag")),
    ("src/controllers/nodeclass/validation.rs", "launch_tags", "ec2", ("RequestTag",)),
    ("src/aws/instance_profile.rs", "instance_profile_tags", "iam", ("RequestTag", "ResourceTag")),
]
# Files whose `ResourceType::X` tag specifications say which EC2 resource
# types a launch tags.
TAGGING_FILES = [
    "src/aws/instance/fleet.rs",
    "src/aws/launch_template/template.rs",
    "src/aws/dry_run.rs",
]
# A tag value the code writes from a variable: the policy's placeholder for
# it; any other variable is a name known only at run time (ANY).
VARIABLES = {"cluster": "${ClusterName}", "region": "${AWS::Region}"}
ANY = object()


def function_body(text, name):
    start = re.search(rf"\bfn {name}\b", text)
    if not start:
        return None
    open_at = text.index("{", start.end())
    depth = 0
    for index in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[open_at:index + 1]
    return None


def constants():
    found = {}
    for _, text in controller_sources():
        found.update(re.findall(r'const ([A-Z0-9_]+): &str = "([^"]*)";', text))
    return found


def tag_key(expression, consts):
    expression = expression.strip()
    literal = re.fullmatch(r'format!\("([^"]*)"\)|"([^"]*)"\.to_string\(\)', expression)
    if literal:
        key = literal.group(1) or literal.group(2)
        return re.sub(r"\{(\w+)\}", lambda m: VARIABLES.get(m.group(1), "{" + m.group(1) + "}"), key)
    constant = re.fullmatch(r"([A-Z0-9_]+)\.to_string\(\)", expression)
    if constant and constant.group(1) in consts:
        return consts[constant.group(1)]
    raise SystemExit(f"check_iam.py cannot read the tag key {expression!r}: teach tag_key")


def tag_value(expression):
    expression = expression.strip()
    literal = re.fullmatch(r'"([^"]*)"\.to_string\(\)', expression)
    if literal:
        return literal.group(1)
    if expression == "String::new()":
        return ""
    variable = re.fullmatch(r"(\w+)\.(?:clone|to_string)\(\)", expression)
    if variable and variable.group(1) in VARIABLES:
        return VARIABLES[variable.group(1)]
    return ANY


def written_tags():
    """{(service, kind): [(writer, {key: value})]} from TAG_WRITERS."""
    consts = constants()
    sources = dict(controller_sources())
    written = {}
    for path, name, service, kinds in TAG_WRITERS:
        body = function_body(sources.get(path, ""), name)
        if body is None:
            raise SystemExit(f"{path}: fn {name} is gone: update TAG_WRITERS in check_iam.py")
        flat = " ".join(body.split())
        inserts = re.findall(r"tags\.insert\( ?(.+?), (.+?),? ?\);", flat)
        if not inserts:
            raise SystemExit(f"{path}: fn {name} inserts no tag that check_iam.py can read")
        tags = {tag_key(key, consts): tag_value(value) for key, value in inserts}
        for kind in kinds:
            written.setdefault((service, kind), []).append((f"{path} fn {name}", tags))
    return written


def glob(pattern, text):
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), text, re.S) is not None


def satisfies(operator, expected, value):
    if value is ANY:  # a name only known at run time satisfies only "*"
        return operator == "StringLike" and "*" in expected
    if operator == "StringEquals":
        return value in expected
    if operator == "StringLike":
        return any(glob(pattern, value) for pattern in expected)
    raise SystemExit(f"check_iam.py does not evaluate condition operator {operator}")


def listed(value):
    return [value] if isinstance(value, str) else list(value)


def tag_conditions(policy):
    """Problems where the policy's tag conditions refuse the tags the code writes."""
    written = written_tags()
    tagged_types = set()
    for path in TAGGING_FILES:
        for name in re.findall(r"ResourceType::([A-Za-z]+)", dict(controller_sources())[path]):
            tagged_types.add(re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower())
    problems = []
    checked = 0
    for statement in policy["Statement"]:
        sid = statement.get("Sid", "?")
        resources = listed(statement["Resource"])
        arn = re.match(r"arn:(?:[$][{][^}]*[}]|[^:]*):([^:]+):", resources[0])
        service = arn.group(1) if arn else "*"
        for operator, block in statement.get("Condition", {}).items():
            for key, expected in block.items():
                found = re.fullmatch(r"aws:(RequestTag|ResourceTag)/(.+)", key)
                if not found:
                    continue
                kind, tag = found.groups()
                for writer, tags in written.get((service, kind), []):
                    checked += 1
                    if tag not in tags:
                        problems.append(f"{sid}: {key} is required, but {writer} does not write tag {tag}")
                    elif not satisfies(operator, listed(expected), tags[tag]):
                        value = "a name" if tags[tag] is ANY else repr(tags[tag])
                        problems.append(f"{sid}: {operator} {key} {expected!r}, but {writer} writes {value}")
                if (service, kind) not in written:
                    problems.append(f"{sid}: {key} on {service} resources, whose tags no TAG_WRITERS entry builds")
        requested = any(k.startswith("aws:RequestTag/") for block in statement.get("Condition", {}).values() for k in block)
        if requested and service == "ec2":
            for resource in resources:
                kind = re.search(r":([a-z-]+)/", resource).group(1)
                if kind not in tagged_types:
                    problems.append(f"{sid}: creating a {kind} needs request tags, and the code tags no {kind}")
    if checked == 0:
        problems.append("no tag condition checked against the code: the scan is broken")
    print(f"     tag conditions: {checked} condition x tag-writer pairs checked; EC2 resource types tagged: {sorted(tagged_types)}")
    return problems


def main():
    text = POLICY.read_text()
    policy = json.loads(text)
    problems, calls, needed = coverage(policy)
    problems += tag_conditions(policy)
    problems += parliament_findings(text)
    problems += template_policy_matches(policy)
    for problem in problems:
        print(f"FAIL {problem}")
    if problems:
        sys.exit(1)
    print(f"ok   {calls} operations called, {needed} actions needed, all allowed, none more; tag conditions hold for the tags the code writes; parliament: nothing above LOW but the justified; the template's policies are these")


if __name__ == "__main__":
    main()
