"""One module per subcommand: `configure(parser)` and `run(args) -> exit code`."""
