"""Writes openapi.json, the benchmark's OpenAPI category, from local copies of the specs in
SPECS (fetch each file at the commit named; paths on the command line, in SPECS' order).

Each case is one component of a spec's `components/schemas`, as an app would hand it to a
constrained decoder: the component itself, with the components it refers to (transitively) kept
at the same place, `components/schemas`, so that its `$ref`s resolve unchanged. Nothing else is
changed (OpenAPI's `example`, `nullable`, `readOnly`, `discriminator`, `x-*` stay). Which
components: the spec's names sorted, `count` of them evenly spaced (all when it has fewer).

    python extract.py openai.json discord.json twilio.json petstore-expanded.yaml uspto.yaml
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

PREFIX = "#/components/schemas/"

# name, file in its repository, repository, commit, license file beside openapi.json, count
SPECS = [
    ("openai", "openapi.json", "openai/openai-openapi",
     "f85dbe223d40e1a31cba812ab2d755c7e98a92a3", "LICENSE-openai", 14),
    ("discord", "specs/openapi.json", "discord/discord-api-spec",
     "74fda0fad044407ea280043a03ffc9bc64c4e49e", "LICENSE-discord", 14),
    ("twilio", "spec/json/twilio_api_v2010.json", "twilio/twilio-oai",
     "d50069b44ea8cd23141385bdb6db48f16ff75bb5", "LICENSE-twilio", 12),
    ("petstore", "_archive_/schemas/v3.0/pass/petstore-expanded.yaml", "OAI/OpenAPI-Specification",
     "46c1076ba6f9a7a09ecaa6b740ab603cf6cc9886", "LICENSE-oai", 3),
    ("uspto", "_archive_/schemas/v3.0/pass/uspto.yaml", "OAI/OpenAPI-Specification",
     "46c1076ba6f9a7a09ecaa6b740ab603cf6cc9886", "LICENSE-oai", 1),
]


def refs(value: Any) -> set[str]:
    """The component names `value` refers to through `#/components/schemas/...`."""
    found: set[str] = set()
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(PREFIX):
            name = urllib.parse.unquote(ref[len(PREFIX):].split("/", 1)[0])
            found.add(name.replace("~1", "/").replace("~0", "~"))
        for item in value.values():
            found |= refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= refs(item)
    return found


def case(components: dict[str, Any], name: str) -> Any:
    closure: dict[str, Any] = {}
    todo = sorted(refs(components[name]))
    while todo:
        ref = todo.pop()
        if ref in closure or ref not in components:
            continue
        closure[ref] = components[ref]
        todo.extend(sorted(refs(components[ref]) - closure.keys()))
    schema = components[name]
    if not closure or not isinstance(schema, dict):
        return schema
    return {**schema, "components": {"schemas": dict(sorted(closure.items()))}}


def main(paths: list[str]) -> None:
    if len(paths) != len(SPECS):
        sys.exit(f"give the {len(SPECS)} spec files in this order: "
                 + ", ".join(spec[1] for spec in SPECS))
    out: dict[str, Any] = {
        "note": "components of public OpenAPI specs (sources: each entry's spec), written by "
                "extract.py",
        "specs": {},
        "schemas": {},
    }
    for (name, path, repo, commit, license_file, count), local in zip(SPECS, paths, strict=True):
        text = Path(local).read_text()
        spec = json.loads(text) if local.endswith(".json") else yaml.safe_load(text)
        components = spec["components"]["schemas"]
        names = sorted(components)
        chosen = names if len(names) <= count else [
            names[(2 * i + 1) * len(names) // (2 * count)] for i in range(count)]
        out["specs"][name] = {
            "source": f"https://github.com/{repo}/blob/{commit}/{path}",
            "commit": commit, "openapi": spec["openapi"], "components": len(names),
            "license": f"{license_file} (beside this file)"}
        for component in chosen:
            out["schemas"][f"{name}/{component}"] = {"spec": name,
                                                     "schema": case(components, component)}
    target = Path(__file__).resolve().parent / "openapi.json"
    target.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
