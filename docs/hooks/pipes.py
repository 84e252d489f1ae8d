"""MkDocs hook: a bar inside a code span of a table cell is written ``\\|`` in the Markdown (or
the table would split there); GitHub shows it as ``|``, Python-Markdown keeps the backslash.
This drops it, in table cells' ``<code>`` only."""

from __future__ import annotations

import re

CELL = re.compile(r"(<t[dh][^>]*>)(.*?)(</t[dh]>)", re.S)
CODE = re.compile(r"<code>(.*?)</code>", re.S)


def _cell(m: re.Match) -> str:
    body = CODE.sub(lambda c: "<code>" + c.group(1).replace("\\|", "|") + "</code>", m.group(2))
    return m.group(1) + body + m.group(3)


def on_page_content(html: str, page, config, files) -> str:
    return CELL.sub(_cell, html)
