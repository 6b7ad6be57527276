"""Predictors share one engine: a cost model prices leaves, the engine lays out the timeline."""
