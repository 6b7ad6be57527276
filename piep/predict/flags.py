"""What every flag of an answer means, how much it widened the answer's interval, and what
would remove it: one registered meaning per flag, given in JSON (`flag_notes`) and printed
under the human tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from piep.core.config import ENCODER_KEYS
from piep.predict.learned import OUT_OF_RANGE_WIDENING
from piep.predict.power import SUSTAINED_S
from piep.predict.transfer import BAND

# serve flags idle_dominated where more than this share of the energy is the boards idle
# with no request in flight
IDLE_DOMINATED = 0.5
W = OUT_OF_RANGE_WIDENING


@dataclass(frozen=True)
class Flag:
    """A flag's registered meaning."""
    name: str
    meaning: str
    widening: str   # what it did to the interval ("none": nothing)
    remedy: str     # what would remove it

    def to_json(self) -> dict[str, str]:
        """The flag as `flag_notes` gives it."""
        return {"flag": self.name, "meaning": self.meaning, "widening": self.widening,
                "remedy": self.remedy}


FLAGS: dict[str, Flag] = {f.name: f for f in (
    Flag("out_of_range",
         "some leaves lie far from the isolated module samples the module models were fitted "
         "on (standardized distance to the nearest sample beyond 1.5x the samples' 95th "
         "percentile nearest-neighbour distance; for a serving engine fitted on replays, "
         "farther than any row of that kind its replays read); `out_of_range_kinds` names "
         "their kinds",
         f"x{W} in log on energy and time (not measured: a chosen factor)",
         "sample those shapes (piep calibrate) and retrain (piep train)"),
    Flag("extrapolated",
         "more than 2 GPUs: the collective and wait models were measured on 2 GPUs only",
         f"x{W} in log (not measured)",
         "measure the collectives on as many GPUs (piep calibrate on a larger machine)"),
    Flag("unmeasured_engine_layout",
         "the engine's profile has no run at this tensor-parallel degree; its host terms are "
         "those of the degrees it measured",
         f"x{W} in log (not measured)",
         "meter runs at this degree (piep measure --engine E --tp N, or runs of your own "
         "harness with piep train --engine E --from-measurements) and refit"),
    Flag("refit_moves_shipped",
         "the predictor answering is your refit (piep train --from-measurements), and it "
         "moves the shipped predictor's answers beyond the 90 % band it keeps (that band was "
         "not sized on your runs); `piep env` names the largest move. A wrong record moves "
         "every answer", "none (the band is the shipped one)",
         "check the records the refit read; to return to the shipped predictor, remove "
         "the refit's folder (piep env names it)"),
    Flag("few_runs_interval",
         "the engine's profile was fitted on too few runs to size its own 90 % band (fewer "
         "than 9 held-out residuals): its interval is its base engine's, or its own largest "
         "held-out error where that is wider", "to the base engine's band (not measured on "
         "this engine)",
         "meter runs of more shapes (9 or more held out) and refit (piep train --engine "
         "NAME --from-measurements)"),
    Flag("unmeasured_sliding_window",
         "the prompt and generated tokens run past the model's sliding window, which the "
         "engine's profile never measured", "none",
         "meter runs past the window and refit the engine's profile"),
    Flag("unmeasured_family",
         "the model's family runs modules beyond Llama's layer (piep.core.families: q/k norms, "
         "post-norms, fused projections, GeGLU, partial RoPE, NoPE or local-global layers, "
         "routed experts) "
         "and no run the engine's profile was fitted on had its family: its modules are "
         "priced from their kinds' module samples (held out on new families: "
         "benchmarks/families_accuracy.py; piep's reference runner runs Llama's layer only)",
         "none (the shipped band)",
         "meter runs of this family with a transformers engine and refit its profile"),
    Flag("text_decoder_only",
         f"the config is a multimodal model's ({', '.join(f'`{k}`' for k in ENCODER_KEYS)}): "
         "piep prices its text decoder on the prompt tokens given; its encoders (an image's "
         "or a sound's pass) are not priced", "none",
         "none for text prompts; for images, add their tokens to --prompt-len (the "
         "decoder's share of them), the encoder's pass stays unpriced"),
    Flag("fp8_unsampled",
         "the model's projections hold FP8 weights and the predictor answering has no module "
         "samples of FP8 projections: they are priced as bf16 GEMMs (at FP8's bytes)",
         "none (the shipped band)",
         "sample them (piep calibrate modules --kinds fp8_linear) and add their model "
         "(piep train --add-kinds)"),
    Flag("fp8_block_scales",
         "the checkpoint scales its FP8 weights per 128x128 block (transformers runs DeepGEMM "
         "or a Triton kernel fetched from the Hub for them, neither sampled here): priced "
         "from the row-wise FP8 projections piep samples (piep.sampling.fp8)",
         "none (the shipped band)",
         "none yet: module samples of the block-scaled kernel"),
    Flag("fp8_experts_unsampled",
         "the experts hold FP8 weights: their grouped GEMMs are priced as the bf16 ones piep "
         "samples, reading a byte per weight (no FP8 grouped-GEMM kernel is sampled)",
         "none (the shipped band)",
         "none yet: module samples of an FP8 grouped GEMM"),
    Flag("unmeasured_expert_parallel",
         "the experts are sharded over the tensor-parallel ranks (ep > 1), which no run "
         "measured: each rank's grouped GEMMs are priced at the busiest rank's pairs (the "
         "others wait for it at the all-reduce; every rank's energy priced so, an upper "
         "bound), generate()'s batched decode with every pair on every rank",
         "x1.5 (log) on energy and time (not measured: a chosen factor)",
         "run calibration/h200/moe/design_eager_ep.jsonl when a multi-GPU machine is "
         "lent (calibration/h200/moe/planned_ep.sh)"),
    Flag("mxfp4_dequantized",
         "the checkpoint's experts are MXFP4: priced as transformers loads them without the "
         "`kernels` package, dequantized to bf16 (memory and GEMMs in bf16); with it, the "
         "Hub's MXFP4 Triton kernels run, which no module sample covers",
         "none (the shipped band)",
         "none yet: module samples of the MXFP4 MoE kernels"),
    Flag("mxfp4_unsampled",
         "the checkpoint's experts are MXFP4 and the engine runs them as stored (vLLM's "
         "fused MoE): priced as its bf16 GEMMs reading 4.25 bits a weight (memory too); no "
         "module sample of an MXFP4 kernel covers them",
         "x1.5 (log) on energy and time (not measured: a chosen factor)",
         "none yet: module samples of the MXFP4 MoE kernels"),
    Flag("uncalibrated_gpu",
         "no calibration of this GPU: the reference GPU's predictor moved by spec-sheet "
         "ratios (calibration/spec_sheets.json)",
         f"a fixed x{BAND[0]}-x{BAND[1]} band (not validated on this GPU; on an H100, "
         "the reference runner's runs: reports/h100.md)",
         "calibrate the GPU (piep calibrate gpu --name NAME, then piep train --gpu NAME)"),
    Flag("power_capped",
         f"a phase of {SUSTAINED_S:g} s or more (a batch's prefill or decode, or a stream's "
         "iterations together) would draw more than the board's power limit: it is priced at "
         "the limit (a batch's phase with its clock and time stretched; a stream's "
         "iterations keep the times their engine's profile was fitted on)", "none",
         "none needed: the board does this; a lower batch or clock plan draws less"),
    Flag("short_window_power",
         f"a phase shorter than {SUSTAINED_S:g} s averages above the board's power limit: the "
         "board's controller lags its limit over short windows (measured on H200 prefills: "
         "up to ~1.07x the 700 W limit; priced up to the predictor's fitted burst ratio "
         "times the limit), so a short prefill can read above 700 W", "none",
         "none needed: a measurement of the same window reads the same"),
    Flag("unsorted_trace",
         "the trace's rows were not in arrival order; they were sorted", "none",
         "sort the trace by arrival_s"),
    Flag("queueing_on_kv_memory",
         "requests waited for KV-cache blocks: the scheduler's memory, not its token budget, "
         "bounded the batch", "none",
         "fewer or shorter requests in flight, more GPUs (tp), or a smaller model"),
    Flag("overloaded",
         "arrivals outpace what the engine serves: each request waits longer for its first "
         "token than the one before, so the latencies and energy per token are of a growing "
         "queue, not of a steady state; `load` gives the arrival rate and the rate the engine "
         "sustained at this mix of requests", "none",
         "let requests arrive at most at load.sustainable_rate_per_s (more replicas: dp), "
         "or price a shorter trace"),
    Flag("idle_dominated",
         f"more than {IDLE_DOMINATED:.0%} of the energy is the boards idle with no request in "
         "flight: per-request energies carry little of it", "none",
         "raise the arrival rate (or price the busy part of the trace)"),
    Flag("unvalidated_engine",
         "another engine's scheduler and host time (--policy): nothing piep measured bounds it",
         "no interval", "fit the engine on its own metered runs (piep train --engine NAME)"),
    Flag("supplied_profile",
         "the engine's steady-state profile was fitted on public measurements piep did not "
         "make (calibration/public/: their source, commit and translation), over piep's "
         "pricing of this GPU (its own calibration, or the reference GPU's moved by "
         "spec-sheet ratios)",
         "the profile's 90 % band, sized on its held-out public rows",
         "meter your own server's benchmark runs and fit a profile on them"),
    Flag("steady_profile_other_gpu",
         "the engine has no steady-state profile on this GPU: its profile of another GPU "
         "(`profile.gpu`) scales this GPU's pricing (the engine's kernels and host path "
         "carried over, not measured here)",
         "the other GPU's band (not validated on this GPU)",
         "fit a profile on this GPU's benchmark runs of the engine"),
    Flag("short_window",
         "a measured window shorter than the NVML energy counter's resolution allows; its "
         "energy is less certain", "none", "measure a longer window (more repeats)"),
)}
NOTE = "note: "  # a free-text note of the deployment (a flag of its own words)


def explain(flags: Iterable[str]) -> list[dict[str, str]]:
    """The registered meaning of each distinct flag, in the order first given (a note
    explains itself)."""
    out, seen = [], set()
    for f in flags:
        if f in seen:
            continue
        seen.add(f)
        if f.startswith(NOTE):
            out.append({"flag": f, "meaning": f[len(NOTE):], "widening": "none",
                        "remedy": "none"})
        else:
            out.append(FLAGS[f].to_json())
    return out


def lines(flags: Iterable[str]) -> list[str]:
    """The flags' meanings as lines under a human table."""
    out = []
    for note in explain(flags):
        if note["flag"].startswith(NOTE):
            out.append(f"* {note['flag']}")
            continue
        extra = "" if note["widening"] == "none" else f" Interval: {note['widening']}."
        out.append(f"* {note['flag']}: {note['meaning']}.{extra} To remove it: "
                   f"{note['remedy']}.")
    return (["flags:"] + out) if out else []
