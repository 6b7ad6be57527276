"""Where the tests' files are, for test modules in the wing folders under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent   # tests/
ROOT = TESTS.parent                       # the repository
DATA = TESTS / "data"                     # the tests' own data (goldens, pinned tables)
