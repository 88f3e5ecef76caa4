"""The pieces of a self-contained HTML page: escaped text, tables, figures inlined as base64
PNG and one inline style sheet. Nothing on the page refers to a network address, so it opens
offline and from an e-mail attachment alike."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

STYLE = """\
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1180px; padding: 0 1.5em 3em;
       color: #1d2330; background: #fff; line-height: 1.4; }
h1 { font-size: 1.5em; margin: 1em 0 0.2em; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid #d5d9e0; padding-bottom: 0.2em; }
h3 { font-size: 1em; margin: 1em 0 0.4em; }
p.lead, p.note { color: #4b5567; margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.4em 0 0.8em; font-size: 0.9em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #e4e7ec; text-align: left; }
th { background: #f3f5f8; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 0.5em 0 1.2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e7ec; }
figcaption { color: #4b5567; font-size: 0.85em; margin-top: 0.2em; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.pair figure { margin: 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 1em; }
nav { font-size: 0.9em; margin: 0.6em 0; }
nav a { margin-right: 1em; color: #2458b3; text-decoration: none; }
.warning { color: #8a4b00; }
footer { color: #7a8394; font-size: 0.8em; margin-top: 2.5em; }
"""


def text(value: object) -> str:
    """``value`` as HTML text (markup characters escaped)."""
    return html.escape(str(value), quote=True)


def heading(level: int, title: str, anchor: str = "") -> str:
    ident = f' id="{text(anchor)}"' if anchor else ""
    return f"<h{level}{ident}>{text(title)}</h{level}>"


def paragraph(content: str, css_class: str = "note") -> str:
    return f'<p class="{css_class}">{text(content)}</p>'


def table(header: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[int] = ()) -> str:
    """A table; the columns at the indices in ``numeric`` are right-aligned."""
    head = "".join(f"<th>{text(cell)}</th>" for cell in header)
    body = []
    for row in rows:
        cells = (
            f'<td class="num">{text(cell)}</td>' if i in numeric else f"<td>{text(cell)}</td>"
            for i, cell in enumerate(row)
        )
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figure(path: Path, caption: str, label: str = "") -> str:
    """The PNG at ``path`` inlined as a data URI, captioned with ``label`` (or its file name)."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = label or path.name
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{text(name)}">'
        f"<figcaption>{text(name)}{': ' if caption else ''}{text(caption)}</figcaption></figure>"
    )


def side_by_side(left: str, right: str) -> str:
    """Two blocks in two columns (A on the left, B on the right)."""
    return f'<div class="pair"><div>{left}</div><div>{right}</div></div>'


def grid(blocks: Sequence[str]) -> str:
    """Blocks (figures) in as many columns as the window holds."""
    return f'<div class="grid">{"".join(blocks)}</div>'


_SECTION = re.compile(r'<h2 id="([^"]+)">(.*?)</h2>')


def contents(body: Sequence[str]) -> str:
    """Links to every section heading (h2 with an id) of ``body``."""
    links = [f'<a href="#{ident}">{title}</a>' for block in body for ident, title in _SECTION.findall(block)]
    return f"<nav>{''.join(links)}</nav>" if links else ""


def page(title: str, body: Sequence[str], footer: str) -> str:
    """A whole page: the title, links to its sections, the body blocks in order, a footer line."""
    first = next((i for i, block in enumerate(body) if block.startswith("<h2")), len(body))
    body = [*body[:first], contents(body), *body[first:]]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<footer>{text(footer)}</footer>\n</body></html>\n"
    )
