"""Learned predictor (LightGBM residual over the roofline + tanh combiner)."""

from __future__ import annotations


def load_learned(gpu: str):
    """The shipped learned predictor for `gpu`, or None while none is trained."""
    return None
