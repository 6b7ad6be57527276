from piep.tree.builder import build_tree
from piep.tree.nodes import Node

__all__ = ["Node", "build_tree"]
