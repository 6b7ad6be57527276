"""`python -m piep`: the command line (piep.cli)."""

from piep.cli import main

raise SystemExit(main())
