#!/usr/bin/env python3
"""Regenerates messages.txt: the field tables of the Kubernetes protobuf
messages the API server double decodes, read from the file descriptors that
a kubectl binary embeds (gzip-compressed FileDescriptorProtos).

    python3 crates/apiserver-double/src/protobuf/generate.py /usr/bin/kubectl > crates/apiserver-double/src/protobuf/messages.txt

Format: `message <name>` or `map <name>` (a map entry: key 1, value 2), then
one line per field: `<number> <jsonName> <type>[*][!] [<message type>]` where
type is s(tring) b(ytes) i(nt) u(nsigned) z(igzag) d(ouble) t (bool) or
m(essage), `*` marks a repeated field and `!` a non-nullable one (a Go value,
not a pointer: its zero value means "unset").
"""

import re
import sys
import zlib

FILES = [
    "k8s.io/api/core/v1", "k8s.io/api/apps/v1", "k8s.io/api/batch/v1", "k8s.io/api/policy/v1",
    "k8s.io/api/coordination/v1", "k8s.io/api/events/v1", "k8s.io/api/storage/v1",
    "k8s.io/api/scheduling/v1", "k8s.io/api/autoscaling/v1", "k8s.io/apimachinery/pkg/apis/meta/v1",
    "k8s.io/apimachinery/pkg/runtime", "k8s.io/apimachinery/pkg/util/intstr",
    "k8s.io/apimachinery/pkg/api/resource",
]
ROOTS = {
    "k8s.io.api.core.v1": ["Pod", "Node", "Namespace", "Event", "ConfigMap", "Secret", "ServiceAccount",
                           "Service", "PersistentVolumeClaim", "PersistentVolume", "Binding"],
    "k8s.io.api.apps.v1": ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"],
    "k8s.io.api.batch.v1": ["Job"],
    "k8s.io.api.policy.v1": ["PodDisruptionBudget", "Eviction"],
    "k8s.io.api.coordination.v1": ["Lease"],
    "k8s.io.api.events.v1": ["Event"],
    "k8s.io.api.storage.v1": ["StorageClass", "CSINode"],
    "k8s.io.api.scheduling.v1": ["PriorityClass"],
    "k8s.io.api.autoscaling.v1": ["Scale"],
    "k8s.io.apimachinery.pkg.apis.meta.v1": ["DeleteOptions"],
}
TYPES = {1: "d", 2: "d", 3: "i", 4: "u", 5: "i", 6: "u", 7: "u", 8: "t", 9: "s", 11: "m", 12: "b",
         13: "u", 14: "i", 15: "i", 16: "i", 17: "z", 18: "z"}
NULLABLE_OPTION = 65001  # gogoproto.nullable


def varint(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def fields(data):
    i, out = 0, []
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 2:
            length, i = varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, value))
    return out


def descriptors(binary):
    found = {}
    for match in re.finditer(b"\x1f\x8b\x08\x00\x00\x00\x00\x00", binary):
        try:
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[match.start():match.start() + 2_000_000])
        except zlib.error:
            continue
        if out[:1] == b"\x0a":
            name = dict(fields(out)).get(1, b"").decode(errors="replace")
            if name.endswith("/generated.proto"):
                found[name[: -len("/generated.proto")]] = out
    return found


def collect(message, prefix, messages):
    parts = fields(message)
    name = prefix + "." + dict(parts)[1].decode()
    is_map = any(n == 7 and any(k == 7 and v == 1 for k, v in fields(o)) for n, o in parts)
    entries = []
    for number, value in parts:
        if number == 2:
            field = {}
            for k, v in fields(value):
                field.setdefault(k, v)
            nullable = not any(k == NULLABLE_OPTION and v == 0 for k, v in fields(field.get(8, b"")))
            entries.append((field[3], (field.get(10) or field[1]).decode(), field[5], field[4], nullable,
                            field.get(6, b"").decode().lstrip(".")))
        elif number == 3:
            collect(value, name, messages)
    messages[name] = (is_map, entries)


def main():
    found = descriptors(open(sys.argv[1], "rb").read())
    messages = {}
    for file in FILES:
        parts = fields(found[file])
        package = dict(parts)[2].decode()
        for number, value in parts:
            if number == 4:
                collect(value, package, messages)
    reachable, stack = set(), [f"{p}.{k}" for p, kinds in ROOTS.items() for k in kinds]
    while stack:
        name = stack.pop()
        if name not in reachable:
            reachable.add(name)
            stack.extend(f[5] for f in messages[name][1] if f[2] == 11)
    for name in sorted(reachable):
        is_map, entries = messages[name]
        print(("map " if is_map else "message ") + name)
        for number, json_name, type_, label, nullable, type_name in entries:
            code = TYPES[type_] + ("*" if label == 3 else "") + ("" if nullable else "!")
            print(f"{number} {json_name} {code}" + (f" {type_name}" if type_name else ""))


if __name__ == "__main__":
    main()
