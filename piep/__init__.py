"""piep: predict, explain and reduce the GPU energy of LLM inference."""

__version__ = "0.1.0"
