"""Worker for the numerics tests: runs the reference decoder (gloo, fp32, CPU) on the
weights and prompt in a saved file and writes its logits and tokens.

    python tests/_numerics_worker.py IN.pt OUT_PREFIX TP PP MODE [DP]   (one process)
    torchrun --nproc-per-node N tests/_numerics_worker.py ...           (N = TP*PP*DP)

With DP > 1 each replica decodes its slice of the prompt batch and writes OUT_PREFIX_dpI.pt.
"""

import json
import sys

import torch

from piep.core.config import ModelSpec
from piep.sampling.generate import Generator
from piep.sampling.model import StageModel, Topology, make_tp_groups
from piep.sampling.runner import Dist


def main(path, out_prefix, tp, pp, mode, dp=1):
    blob = torch.load(path)
    spec = ModelSpec.from_hf_config(json.loads(blob["config"]), name="tiny")
    d = Dist(backend="gloo")
    topo = Topology(tp=tp, pp=pp, dp=dp, rank=d.rank)
    make_tp_groups(topo, d.world)
    share = blob["prompt"].shape[0] // dp
    prompt = blob["prompt"][topo.dp_rank * share:(topo.dp_rank + 1) * share]
    gen_len = blob["gen_len"]
    model = StageModel(spec, topo, batch=prompt.shape[0], max_len=prompt.shape[1] + gen_len,
                       device="cpu", dtype=torch.float32, state=blob["state"])
    g = Generator(model, topo, prompt_len=prompt.shape[1], gen_len=gen_len, mode=mode,
                  prompt=prompt)
    g.keep_logits = True
    g.prefill()
    g.decode()
    if topo.last and topo.tp_rank == 0:
        torch.save({"logits": torch.stack(g.step_logits, 1), "tokens": g.tokens.T.clone()},
                   f"{out_prefix}.pt" if dp == 1 else f"{out_prefix}_dp{topo.dp_rank}.pt")
    d.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), a[4], int(a[5]) if len(a) > 5 else 1)
