from piep.cli import main

raise SystemExit(main())
