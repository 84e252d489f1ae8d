"""The REST API's OpenAPI document for the docs site, and its reference page.

    python docs/hooks/openapi.py          writes docs/api/openapi.json from the app (needs minihpc's api extra)
    python docs/hooks/openapi.py --check  exits 1 when the committed file is stale

As an MkDocs hook (mkdocs.yml ``hooks:``) it turns the committed JSON into the endpoint
reference of docs/api.md at build time, where the page says ``<!-- openapi-reference -->``:
the build reads the JSON only, so it needs neither minihpc nor a Redis.
tests/unit/test_docs.py fails when the committed document is not the app's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "api" / "openapi.json"
MARKER = "<!-- openapi-reference -->"
UNUSED = "redis://127.0.0.1:1/0"
"""A Redis URL for building the app: nothing connects until a request comes."""


def spec() -> dict:
    """The app's OpenAPI document, from ``app.openapi()``."""
    import redis

    from minihpc.api.app import create_app
    from minihpc.state.store import Store

    return create_app(UNUSED, Store(redis.Redis.from_url(UNUSED))).openapi()


def render(document: dict) -> str:
    return json.dumps(document, indent=2) + "\n"


def _type(schema: dict) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    text = schema.get("type", "any")
    bounds = [f"{k} {schema[k]}" for k in ("minimum", "maximum") if k in schema]
    if "default" in schema:
        bounds.append(f"default {schema['default']}")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def reference(document: dict) -> str:
    """Markdown: one section per route, from the OpenAPI document."""
    out = [f"Generated from `api/openapi.json` ({document['info']['title']} "
           f"{document['info']['version']}, OpenAPI {document['openapi']}).", ""]
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            out += [f"### `{method.upper()} {path}`", ""]
            text = op.get("description") or op.get("summary", "")
            token = "a token" if op.get("security") else "no token"
            out += [f"{text} ({token}; tag `{', '.join(op.get('tags', []))}`)".replace("``", "`"), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required |", "|---|---|---|---|"]
                out += [f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                        f"{'yes' if p.get('required') else 'no'} |" for p in params]
                out.append("")
            codes = [c for c in op.get("responses", {}) if c != "422"]
            out += [f"Answers {', '.join(codes)}; errors as `{{\"error\": \"...\"}}`.", ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """MkDocs hook: the reference where the page asks for it."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference(json.loads(OUT.read_text())))


def main(argv: list[str]) -> int:
    text = render(spec())
    if "--check" in argv:
        if not OUT.exists() or json.loads(OUT.read_text()) != json.loads(text):
            print(f"{OUT} is stale: run python docs/hooks/openapi.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(json.loads(text)['paths'])} paths)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
