"""Every command-line flag, frozen: a new flag (or one gone) is a decision made in this
file's list, not a side effect (a workload is better said in `--scenario FILE.json`)."""

import argparse
import os
from pathlib import Path

import pytest

from piep.cli import build_parser

pytestmark = pytest.mark.pure

FROZEN = Path(__file__).resolve().parent / "data" / "cli_flags.txt"


def cli_flags(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """'COMMAND --flag' (aliases together) and 'COMMAND <positional>' of every command."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += cli_flags(sub, f"{prefix}{name} ")
        elif action.option_strings:
            out.append(prefix + " ".join(sorted(action.option_strings)))
        else:
            out.append(f"{prefix}<{action.dest}>")
    return out


def test_every_flag_is_a_decision():
    """To add or drop a flag on purpose: PIEP_UPDATE_GOLDEN=1 pytest this test, and say
    why in the commit."""
    now = "\n".join(cli_flags(build_parser())) + "\n"
    if os.environ.get("PIEP_UPDATE_GOLDEN"):
        FROZEN.write_text(now)
    frozen = FROZEN.read_text()
    added = sorted(set(now.splitlines()) - set(frozen.splitlines()))
    gone = sorted(set(frozen.splitlines()) - set(now.splitlines()))
    assert not added and not gone, f"flags added {added}, gone {gone}"
    assert len(frozen.splitlines()) == len(set(frozen.splitlines()))  # no flag twice


def test_a_start_configures_only_its_command():
    """`piep serve ...` imports serve's module, not the sixteen other commands'; the one
    named gets every flag it has in the full parser."""
    import subprocess
    import sys
    code = ("import sys; from piep.cli import build_parser; "
            "p = build_parser(['serve', '--model', 'llama-2-7b']); "
            "print(sorted(m for m in sys.modules if m.startswith('piep.commands.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert eval(out) == ["piep.commands.common", "piep.commands.serve"]
    full = [f for f in cli_flags(build_parser()) if f.startswith("serve ")]
    one = [f for f in cli_flags(build_parser(["-v", "serve"])) if f.startswith("serve ")]
    bare = [f for f in cli_flags(build_parser([])) if f.startswith("serve ")]
    assert one == full and len(full) > 10
    assert bare == ["serve --help -h"]
