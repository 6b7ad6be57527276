"""piep: predict, explain and reduce the GPU energy of LLM inference."""

__version__ = "0.1.0"

# piep's rooms (top-level modules and folders) by floor, 0 lowest: a room imports rooms of
# its own floor and below only, the core nothing outside itself (tests/test_layers.py);
# docs/development.md's map is drawn from this table (benchmarks/docs.py)
FLOORS = {
    0: ("__init__", "core"),
    1: ("device", "stats"),
    2: ("clocks",),
    3: ("tree",),
    4: ("predict",),
    5: ("api", "plan", "sampling", "compare", "sweep", "serving", "fit"),
    6: ("optimize", "report"),
    7: ("commands",),
    8: ("cli", "__main__"),
}
# the core's modules by floor: each imports only the core's floors below its own
CORE_FLOORS = {
    0: ("errors", "families"),
    1: ("config", "outputs", "engines", "results", "samples"),
    2: ("artifacts",),
    3: ("gpus", "models", "trace", "foreign"),
    4: ("layout",),
    5: ("scenario", "records"),
    6: ("writer", "dataset"),
}
