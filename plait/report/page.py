"""The HTML of a report: one self-contained page (inline CSS, figures as data: URLs, no script),
in which every string that came from a run (names, labels, the config, error text) is escaped."""

from __future__ import annotations

import base64
from html import escape

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222;
       background: #f6f7f9; }
header { background: #1f3b57; color: #fff; padding: 1.2rem 2rem; }
header h1 { margin: 0 0 .3rem 0; font-size: 1.5rem; }
header p { margin: 0; opacity: .85; font-size: .9rem; word-break: break-all; }
main { max-width: 1200px; margin: 0 auto; padding: 1rem 2rem 3rem; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: .8rem 1.2rem 1.2rem;
          margin: 1rem 0; }
h2 { font-size: 1.2rem; margin: .4rem 0 .8rem; color: #1f3b57; }
h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .3rem 0 .8rem; }
th, td { border-bottom: 1px solid #e3e6ea; padding: .25rem .7rem; text-align: left; vertical-align: top; }
th { background: #f0f2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fa; border: 1px solid #e3e6ea; padding: .6rem; font-size: .78rem; max-height: 28rem;
      overflow: auto; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: .8rem; }
figure { margin: 0; min-width: 0; }
figure.wide { grid-column: 1 / -1; }
figure img { width: 100%; height: auto; border: 1px solid #eceef1; }
figcaption { font-size: .8rem; color: #555; }
.note { color: #6b4e00; background: #fff8e1; border: 1px solid #f1dca7; padding: .4rem .7rem; font-size: .85rem;
        border-radius: 4px; }
.scroll { overflow-x: auto; }
"""


def page(title: str, subtitle: str, sections: list[str]) -> str:
    """The whole document."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>"
            f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>\n<main>\n"
            + "\n".join(sections) + "\n</main></body></html>\n")


def section(title: str, *parts: str) -> str:
    """A titled block; ``parts`` are HTML already (made by the functions here)."""
    return f"<section><h2>{escape(title)}</h2>\n" + "\n".join(p for p in parts if p) + "</section>"


def heading(text: str) -> str:
    return f"<h3>{escape(text)}</h3>"


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def preformatted(text: str) -> str:
    return f"<pre>{escape(text)}</pre>"


def table(header: list[str], rows: list[list], numeric: bool = True) -> str:
    """A table of text and numbers (numbers right-aligned, floats to 4 significant digits)."""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v, numeric) for v in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def pairs(rows: list[list]) -> str:
    """A two-column table of names and values, without a header."""
    body = "".join(f"<tr><th>{escape(str(name))}</th>{_cell(value, True)}</tr>" for name, value in rows)
    return f'<div class="scroll"><table><tbody>{body}</tbody></table></div>'


def _cell(value, numeric: bool) -> str:
    if isinstance(value, bool) or value is None:
        return f"<td>{'-' if value is None else escape(str(value))}</td>"
    if numeric and isinstance(value, float):
        return f'<td class="num">{value:.4g}</td>'
    if numeric and isinstance(value, int):
        return f'<td class="num">{value:,}</td>'
    return f"<td>{escape(str(value))}</td>"


def figures(items: list[str]) -> str:
    return '<div class="figures">' + "".join(items) + "</div>" if items else ""


def figure_html(fig, caption: str = "", wide: bool = False) -> str:
    """A matplotlib figure as an inline SVG image (a data: URL: nothing is fetched, and the SVG's
    ids cannot clash with another figure's)."""
    from plait.visualize.figures import svg_text

    data = base64.b64encode(svg_text(fig).encode("utf-8")).decode("ascii")
    cls = ' class="wide"' if wide else ""
    text = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return f'<figure{cls}><img alt="{escape(caption)}" src="data:image/svg+xml;base64,{data}">{text}</figure>'
