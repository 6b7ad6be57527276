"""Row-wise FP8 projections, as an FP8 checkpoint's layers run on Hopper: each weight row
(output channel) stored in float8 e4m3 with its own float scale; each input token's row
scaled by its own max and cast to e4m3 at run time (dynamic per-token activations); one
FP8 GEMM with both scales, output bf16 (`torch._scaled_mm`'s row-wise path: the CUTLASS
kernel PyTorch took from FBGEMM's f8f8bf16_rowwise, which transformers' `fbgemm_fp8`
checkpoints call, and the scheme of compressed-tensors' FP8-dynamic checkpoints).

The module sampler's `fp8_linear` op and the reference runner's FP8 layers are both this
module's `Fp8Linear`, so what is sampled is what runs.
"""

from __future__ import annotations

import torch
from torch import nn

E4M3_MAX = 448.0  # the largest float8 e4m3fn value


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`x` (rows x k) in e4m3 and each row's float32 scale (rows x 1): x ~ q * scale."""
    scale = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


class Fp8Linear(nn.Module):
    """A linear layer of row-wise FP8 weights (a float scale per output row) over inputs
    quantized per token at run time; the output in the input's dtype."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        q, scale = quantize_rows(weight.detach())
        self.register_buffer("weight", q)                    # (out, in) e4m3
        self.register_buffer("weight_scale", scale.t().contiguous())  # (1, out) float32
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "Fp8Linear":
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        q, scale = quantize_rows(rows)
        out = torch._scaled_mm(q, self.weight.t(), scale_a=scale, scale_b=self.weight_scale,
                               out_dtype=x.dtype)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def to_fp8(model: nn.Module) -> int:
    """Replace every linear layer inside the decoder's layers (attention and MLP
    projections; not the LM head, not the embeddings) with an `Fp8Linear` of its weights,
    as an FP8 checkpoint holds them. Returns how many were replaced."""
    from piep.core.errors import ConfigError
    layers = model.get_decoder().layers
    swaps = [(parent, name, child) for parent in layers.modules()
             for name, child in parent.named_children() if type(child) is nn.Linear]
    odd = next((f"{name} ({c.out_features} x {c.in_features})" for _, name, c in swaps
                if c.in_features % 16 or c.out_features % 16), None)
    if odd:  # (what torch._scaled_mm refuses, in a traceback, at the first call)
        raise ConfigError(f"FP8 projections take sizes in multiples of 16: {odd} is not; "
                          f"give the config without quantization_config to measure it in "
                          f"bf16")
    for parent, name, child in swaps:
        setattr(parent, name, Fp8Linear.from_linear(child))
    return len(swaps)
