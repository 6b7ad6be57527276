"""The predictor: the cost models that price a model tree's leaves, the timeline and energy
partition (`pricing`), engine and steady-state profiles, a scenario's resolution and flags.
The wings above it import it (api, serving, plan, fit, sampling's designs); it imports
core/, stats/ and tree/."""

__all__ = ["collectives", "engines", "features", "flags", "gbdt", "host", "learned",
           "module_models", "power", "pricing", "resolve", "roofline", "steady", "store",
           "table", "timeline", "transfer"]
