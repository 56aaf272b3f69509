"""The formats a graph is written in: a module of its own, so that naming them (the
CLI's `--format` choices) imports neither networkx nor graphviz."""

from enum import StrEnum


class GraphFormat(StrEnum):
    """Output formats."""

    SVG = "svg"
    PNG = "png"
    DOT = "dot"
