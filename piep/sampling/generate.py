"""Greedy generation with the reference decoder: prefill, then decode steps, in `graph`
(one captured step replayed) or `eager` mode, across TP/PP ranks of one replica.

Each process owns one GPU (or a CPU slot under gloo). On CPU, `graph` runs the same
static-shape step without capture, so its numerics are tested in CI.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from piep.sampling.model import StageModel, Topology, check_finite, greedy
from piep.sampling.protocol import capture


class Generator:
    def __init__(self, model: StageModel, topo: Topology, *, prompt_len: int, gen_len: int,
                 mode: str, prompt: torch.Tensor | None = None, seed: int = 0):
        self.m, self.topo = model, topo
        self.prompt_len, self.gen_len, self.mode = prompt_len, gen_len, mode
        dev, b, h = model.device, model.batch, model.spec.hidden_size
        self.cuda = torch.device(dev).type == "cuda"
        if prompt is None:
            g = torch.Generator(device=dev)
            g.manual_seed(seed + 17 * topo.dp_rank)
            prompt = torch.randint(0, model.spec.vocab_size, (b, prompt_len), device=dev,
                                   generator=g)
        self.prompt = prompt.to(dev)
        self.tok = torch.zeros(b, dtype=torch.long, device=dev)      # current token
        self.x_in = torch.zeros(b, 1, h, device=dev, dtype=model.dtype)
        self.x_out = torch.zeros(b, 1, h, device=dev, dtype=model.dtype)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)      # graph-mode position
        self.tokens = torch.zeros(gen_len, b, dtype=torch.long, device=dev)
        self.last_logits: torch.Tensor | None = None
        self.graph = None
        self.keep_logits = False  # tests: keep every step's full logits (last stage)
        self.step_logits: list[torch.Tensor] = []

    # --- point-to-point between stages of this replica -----------------------------
    def _send(self, t: torch.Tensor, pp_rank: int) -> None:
        dist.send(t.contiguous(), self.topo.peer(pp_rank))

    def _recv(self, t: torch.Tensor, pp_rank: int) -> torch.Tensor:
        dist.recv(t, self.topo.peer(pp_rank))
        return t

    def _pass_token_back(self) -> None:
        topo = self.topo
        if topo.pp == 1:
            return
        if topo.last:
            self._send(self.tok, 0)
        elif topo.first:
            self._recv(self.tok, topo.pp - 1)

    # --- prefill ---------------------------------------------------------------------
    def prefill(self) -> None:
        m, topo = self.m, self.topo
        b, p, h = m.batch, self.prompt_len, m.spec.hidden_size
        if topo.first:
            x = m.embed_tokens(self.prompt)
        else:
            x = self._recv(torch.empty(b, p, h, device=m.device, dtype=m.dtype), topo.pp_rank - 1)
        x = m.prefill(x)
        if not topo.last:
            self._send(x, topo.pp_rank + 1)
        else:
            logits = m.logits(x[:, -1:])
            self.last_logits = logits
            if self.keep_logits:
                self.step_logits = [logits[:, -1].clone()]
            self.tok.copy_(greedy(logits[:, -1]))
            self.tokens[0].copy_(self.tok)
        self._pass_token_back()
        self.pos.fill_(p)

    # --- decode ------------------------------------------------------------------------
    def _static_step(self) -> None:
        """The body that graph mode captures: reads tok/x_in and pos, advances pos."""
        m, topo = self.m, self.topo
        x = m.embed_tokens(self.tok)[:, None] if topo.first else self.x_in
        y = m.decode_static(x, self.pos)
        if topo.last:
            logits = m.logits(y)
            if self.keep_logits and self.graph is None:
                self.step_logits.append(logits[:, -1].clone())
            self.tok.copy_(greedy(logits[:, -1]))
            self.tokens.index_copy_(0, self.pos - (self.prompt_len - 1), self.tok[None])
        else:
            self.x_out.copy_(y)
        self.pos.add_(1)

    def capture(self, warmup_steps: int = 3) -> None:
        """Capture one decode step as a CUDA graph (after warm-up on a side stream)."""
        if not (self.cuda and self.mode == "graph"):
            return
        self.prefill()
        saved = self.pos.clone()

        def warm():
            for _ in range(warmup_steps):
                self._io_before()
                self._static_step()
                self._io_after()
        self.graph = capture(self._static_step, warm=warm, then=lambda: self.pos.copy_(saved))
        torch.cuda.synchronize()

    def _io_before(self) -> None:
        topo = self.topo
        if not topo.first:
            self._recv(self.x_in, topo.pp_rank - 1)

    def _io_after(self) -> None:
        topo = self.topo
        if not topo.last:
            self._send(self.x_out, topo.pp_rank + 1)
        self._pass_token_back()

    def decode(self, steps: int | None = None) -> None:
        """Run `steps` decode steps (default gen_len - 1) from the position after prefill."""
        steps = self.gen_len - 1 if steps is None else steps
        m, topo = self.m, self.topo
        self.pos.fill_(self.prompt_len)
        if self.mode == "graph":
            for _ in range(steps):
                self._io_before()
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self._static_step()
                self._io_after()
            return
        b, h = m.batch, m.spec.hidden_size
        for i in range(steps):
            pos = self.prompt_len + i
            if topo.first:
                x = m.embed_tokens(self.tok)[:, None]
            else:
                x = self._recv(torch.empty(b, 1, h, device=m.device, dtype=m.dtype),
                               topo.pp_rank - 1)
            y = m.decode_eager(x, pos)
            if topo.last:
                logits = m.logits(y)
                if self.keep_logits:
                    self.step_logits.append(logits[:, -1].clone())
                self.tok.copy_(greedy(logits[:, -1]))
                self.tokens[i + 1].copy_(self.tok)
            else:
                self._send(y, topo.pp_rank + 1)
            self._pass_token_back()

    def check(self) -> None:
        if self.last_logits is not None:
            check_finite(self.last_logits, "prefill logits")
