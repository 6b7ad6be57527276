"""`piep plan` (not built yet)."""

from piep.commands._stub import not_yet


def configure(parser) -> None:
    parser.add_argument("rest", nargs="*", help="arguments (not used yet)")


run = not_yet("plan", "the clock-plan issue")
