"""One module per subcommand: `configure(parser)` and `run(args) -> exit code`.
Only piep.cli imports it; it imports the API and the wings' doors."""

__all__ = ["apply", "calibrate", "common", "compare", "env", "measure", "meter", "models",
           "optimize", "plan", "predict", "report", "serve", "steady", "sweep", "train",
           "tree"]
