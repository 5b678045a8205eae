"""The report as a list of blocks (headings, paragraphs, tables, code, figures), rendered once to
Markdown and once to self-contained HTML; every piece of run text is escaped for each."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #1d1d1d; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.55em; text-align: left;
         vertical-align: top; white-space: pre-line; }
th { background: #f3f3f3; }
code, pre { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 0.88em; }
pre { background: #f7f7f7; border: 1px solid #e2e2e2; padding: 0.7em; overflow-x: auto; }
figure { margin: 1em 0; overflow-x: auto; }
figcaption { font-size: 0.9em; color: #444; }
details { margin: 0.4em 0; }
"""


@dataclass(frozen=True)
class Mono:
    """Inline code: a sha, a command, a value."""

    text: str


Span = str | Mono


@dataclass(frozen=True)
class Heading:
    """A section heading (level 1-4)."""

    level: int
    text: str


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text and inline code."""

    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Bullets:
    """A list; each item a sequence of spans."""

    items: tuple[tuple[Span, ...], ...]


@dataclass(frozen=True)
class Table:
    """Rows under headers; every cell plain text (inline code where a Mono)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[Span, ...], ...]


@dataclass(frozen=True)
class Code:
    """A block of literal text (a diff, a commit message)."""

    text: str
    language: str = ""


@dataclass(frozen=True)
class Figure:
    """An SVG figure: a file beside the report (Markdown), inlined (HTML)."""

    file: str
    svg: str
    caption: str


@dataclass(frozen=True)
class Details:
    """Blocks shown on demand (HTML) or under a bold line (Markdown)."""

    summary: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)


Block = Heading | Para | Bullets | Table | Code | Figure | Details

MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")
WHITESPACE = re.compile(r"\s+")  # one line per paragraph or cell: newlines would end them


def md_text(text: str) -> str:
    """Run text for Markdown: markup characters escaped, HTML made inert."""
    flat = WHITESPACE.sub(" ", text)
    escaped = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return MD_SPECIAL.sub(r"\\\1", escaped)


def md_code(text: str) -> str:
    """An inline code span that holds any text (backticks included)."""
    flat = " ".join(text.split())
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _md_spans(spans: tuple[Span, ...]) -> str:
    return "".join(md_code(s.text) if isinstance(s, Mono) else md_text(s) for s in spans)


def _md_cell(cell: Span) -> str:
    # GFM splits a row at any unescaped pipe, code spans included.
    return md_code(cell.text).replace("|", "\\|") if isinstance(cell, Mono) else md_text(cell)


def _md_block(block: Block) -> list[str]:
    if isinstance(block, Heading):
        return ["#" * block.level + " " + md_text(block.text), ""]
    if isinstance(block, Para):
        return [_md_spans(block.spans), ""]
    if isinstance(block, Bullets):
        return [*("- " + _md_spans(item) for item in block.items), ""]
    if isinstance(block, Table):
        lines = ["| " + " | ".join(md_text(h) for h in block.headers) + " |"]
        lines.append("|" + "---|" * len(block.headers))
        lines.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows)
        return [*lines, ""]
    if isinstance(block, Code):
        fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", block.text)), default=0) + 1)
        return [fence + block.language, block.text.rstrip("\n"), fence, ""]
    if isinstance(block, Figure):
        return [f"![{md_text(block.caption)}]({block.file})", "", f"*{md_text(block.caption)}*", ""]
    lines = [f"**{md_text(block.summary)}**", ""]
    for inner in block.blocks:
        lines.extend(_md_block(inner))
    return lines


def render_markdown(blocks: list[Block]) -> str:
    """The report as Markdown (figures referenced as files beside it)."""
    lines: list[str] = []
    for block in blocks:
        lines.extend(_md_block(block))
    return "\n".join(lines).rstrip() + "\n"


def _html_spans(spans: tuple[Span, ...]) -> str:
    return "".join(
        f"<code>{html.escape(s.text)}</code>" if isinstance(s, Mono) else html.escape(s)
        for s in spans
    )


def inline_svg(svg: str) -> str:
    """An SVG file's markup for an HTML page: no XML prolog, no namespace URL (HTML puts an
    <svg> element in the SVG namespace itself)."""
    body = re.sub(r"^<\?xml[^>]*\?>\s*", "", svg)
    return body.replace(" xmlns='http://www.w3.org/2000/svg'", "", 1)


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{html.escape(block.text)}</h{block.level}>"
    if isinstance(block, Para):
        return f"<p>{_html_spans(block.spans)}</p>"
    if isinstance(block, Bullets):
        items = "".join(f"<li>{_html_spans(item)}</li>" for item in block.items)
        return f"<ul>{items}</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{_html_spans((c,))}</td>" for c in row) + "</tr>"
            for row in block.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, Code):
        return f"<pre><code>{html.escape(block.text)}</code></pre>"
    if isinstance(block, Figure):
        caption = html.escape(block.caption)
        return f"<figure>{inline_svg(block.svg)}<figcaption>{caption}</figcaption></figure>"
    inner = "\n".join(_html_block(b) for b in block.blocks)
    return f"<details><summary>{html.escape(block.summary)}</summary>\n{inner}\n</details>"


def render_html(blocks: list[Block], title: str) -> str:
    """The report as one self-contained HTML page: styles and figures inline, no URL outside."""
    body = "\n".join(_html_block(block) for block in blocks)
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"{body}\n</body>\n</html>\n"
    )
