"""The model tree: one builder (`build_tree`) makes the tree of modules a deployment runs,
from its model's facts, layout and engine; every pricer reads its leaves.
Any wing above it may import it; it imports core/ only."""

from piep.tree.builder import build_tree
from piep.tree.nodes import Node

__all__ = ["Node", "build_tree"]
