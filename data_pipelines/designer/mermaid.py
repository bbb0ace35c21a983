"""A validator for Mermaid flowcharts, the form DESIGNER's design logics take.

DESIGNER (Liu et al., 2025) has a reasoning model write each question's design logic as a Mermaid
flowchart. ``parse_flowchart`` accepts the flowchart subset such logics use and returns the nodes and
edges, or raises ``MermaidError`` saying which line is wrong:

* a header ``flowchart DIR`` or ``graph DIR`` with DIR one of TD, TB, BT, LR, RL;
* statements one per line (or separated by ``;``): a node ``ID``, ``ID[text]``, ``ID(text)``,
  ``ID((text))``, ``ID{text}``, ``ID([text])``, ``ID[[text]]``, ``ID>text]``, ``ID{{text}}``, or a chain
  ``node LINK node LINK node ...`` with links ``-->``, ``---``, ``-.->``, ``==>``, ``--x``, ``--o`` and an
  optional label ``-->|text|`` or ``-- text -->``;
* ``%%`` comments, ``subgraph ... end`` blocks, ``classDef`` / ``class`` / ``style`` / ``linkStyle`` lines.

A chart must have at least ``min_nodes`` nodes and one edge; a node's label may not be given two
different texts. Labels may hold any characters except their own closing bracket (quoted labels
``["..."]`` may hold brackets). This is not the full Mermaid grammar (no ``&`` fan-out, no click events).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

HEADER = re.compile(r"^(flowchart|graph)\s+(TD|TB|BT|LR|RL)\s*;?\s*$")
NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHAPES = (("((", "))"), ("([", "])"), ("[[", "]]"), ("{{", "}}"), ("[", "]"), ("(", ")"), ("{", "}"), (">", "]"))
LINK = re.compile(r"\s*(?:(-->|---|-\.->|==>|--x|--o)(?:\|([^|]*)\|)?|--\s+([^-|>]+?)\s+-->)\s*")
DIRECTIVES = ("classDef ", "class ", "style ", "linkStyle ", "click ")


class MermaidError(ValueError):
    """A chart that is not a valid flowchart; the message names the line."""


@dataclass
class Flowchart:
    direction: str
    nodes: dict[str, str] = field(default_factory=dict)  # id -> label (the id when unlabeled)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (source, target, label)


def _node(text: str, pos: int, line_no: int) -> tuple[str, str | None, int]:
    """One node at ``text[pos:]``: (id, label or None, position after it)."""
    match = NODE_ID.match(text, pos)
    if not match:
        raise MermaidError(f"line {line_no}: expected a node id at {text[pos:pos + 20]!r}")
    node_id, pos = match.group(), match.end()
    for opening, closing in SHAPES:
        if text.startswith(opening, pos):
            start = pos + len(opening)
            if text.startswith('"', start):
                end_quote = text.find('"', start + 1)
                if end_quote < 0 or not text.startswith(closing, end_quote + 1):
                    raise MermaidError(f"line {line_no}: unterminated quoted label of node {node_id!r}")
                return node_id, text[start + 1:end_quote], end_quote + 1 + len(closing)
            end = text.find(closing, start)
            if end < 0:
                raise MermaidError(f"line {line_no}: node {node_id!r} opens {opening!r} without {closing!r}")
            label = text[start:end]
            if not label.strip():
                raise MermaidError(f"line {line_no}: node {node_id!r} has an empty label")
            if any(c in label for c in "[]{}()") and opening not in ("((", "{{"):
                raise MermaidError(f"line {line_no}: node {node_id!r} label {label!r} holds brackets (quote it)")
            return node_id, label.strip(), end + len(closing)
    return node_id, None, pos


def _statement(chart: Flowchart, text: str, line_no: int) -> None:
    chain: list[str] = []
    labels: list[str] = []
    pos = 0
    while True:
        node_id, label, pos = _node(text, pos, line_no)
        old = chart.nodes.get(node_id)
        if label is not None and old not in (None, node_id, label):
            raise MermaidError(f"line {line_no}: node {node_id!r} relabeled from {old!r} to {label!r}")
        if label is not None or node_id not in chart.nodes:
            chart.nodes[node_id] = label if label is not None else node_id
        chain.append(node_id)
        if pos >= len(text.rstrip()):
            break
        link = LINK.match(text, pos)
        if not link:
            raise MermaidError(f"line {line_no}: expected a link (-->, ---, -.->, ==>) at {text[pos:pos + 20]!r}")
        labels.append((link.group(2) or link.group(3) or "").strip())
        pos = link.end()
        if pos >= len(text):
            raise MermaidError(f"line {line_no}: link without a target node")
    chart.edges.extend((a, b, lab) for a, b, lab in zip(chain, chain[1:], labels))


def parse_flowchart(source: str, min_nodes: int = 2) -> Flowchart:
    """The flowchart in ``source`` (see the module docstring); ``MermaidError`` if it is not one."""
    lines = [(n, line.strip()) for n, line in enumerate(source.strip().splitlines(), start=1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("%%")]
    if not lines:
        raise MermaidError("empty chart")
    header = HEADER.match(lines[0][1])
    if not header:
        raise MermaidError(f"line {lines[0][0]}: expected 'flowchart TD|TB|BT|LR|RL' (or 'graph ...'), "
                           f"got {lines[0][1][:40]!r}")
    chart = Flowchart(direction=header.group(2))
    depth = 0
    for line_no, line in lines[1:]:
        for statement in (s.strip() for s in line.split(";")):
            if not statement or statement.startswith(DIRECTIVES):
                continue
            if statement.startswith("subgraph ") or statement == "subgraph":
                depth += 1
            elif statement == "end":
                if depth == 0:
                    raise MermaidError(f"line {line_no}: 'end' without 'subgraph'")
                depth -= 1
            elif statement.startswith("direction "):
                if depth == 0:
                    raise MermaidError(f"line {line_no}: 'direction' outside a subgraph")
            else:
                _statement(chart, statement, line_no)
    if depth:
        raise MermaidError(f"{depth} subgraph(s) without 'end'")
    if len(chart.nodes) < min_nodes:
        raise MermaidError(f"{len(chart.nodes)} node(s); a design logic needs at least {min_nodes}")
    if not chart.edges:
        raise MermaidError("no edges")
    return chart


def extract_flowchart(text: str) -> str:
    """The chart in a model's reply: from the first ``flowchart``/``graph`` line (inside a ```mermaid
    fence if there is one) up to the closing fence or the first blank line, whichever comes first;
    ``MermaidError`` if there is no header. Prose after the chart is thereby not part of it."""
    fence = re.search(r"```(?:mermaid)?[ \t]*\n", text)
    body = text[fence.end():] if fence else text
    start = re.search(r"^[ \t]*(flowchart|graph)\b", body, re.MULTILINE)
    if not start:
        raise MermaidError("no 'flowchart'/'graph' header in the reply")
    lines = []
    for line in body[start.start():].splitlines():
        if not line.strip() or line.strip().startswith("```"):
            break
        lines.append(line.rstrip())
    return "\n".join(lines)
