"""Shared body of subcommands that exist on the roadmap but are not built yet."""

from piep.errors import NotImplementedYet


def not_yet(name: str, issue: str):
    def run(args) -> int:
        raise NotImplementedYet(f"`piep {name}` is not implemented yet ({issue})")
    return run
