"""The census: public config.json files of decoder-only models deployed in 2025-26, and
what piep answers of them (a prediction at the smallest tensor-parallel degree whose
layout fits one H200 each, or the one line that says why not).

    python benchmarks/model_census.py            # the table and the count
    python benchmarks/model_census.py --write    # reports/model_census.md
    python benchmarks/model_census.py --import MODEL_PRESET_PY   # (re)make the census
    python benchmarks/model_census.py --import-md MODEL_CONFIG_MD   # and the Qwen3 configs

The configs are `model_trees/public/*.json`; `SOURCES.json` names where each
was read: the Hugging Face configs MLC LLM copied into its model presets
(`python/mlc_llm/model/model_preset.py` of github.com/mlc-ai/mlc-llm at the commit named
there; `--import` reads that file's `MODEL_PRESETS` literal, no code of it runs), the
Qwen3 configs of LLM-Prof's list of the configs it profiled (`sglang/Model_Config.md` of
github.com/citsjtu2020/LLM-Prof at the commit named there: a name line, then the JSON;
`--import-md`), the GLM-4.5 configs from the Megatron-LM arguments of slime's model
scripts (`scripts/models/glm4.5-*.sh` of the repositories named in MEGATRON; `--import-sh`
translates each argument to its config.json key, `MEGATRON_KEYS`, and leaves the rest to
transformers' defaults), the configs MaxText writes as transformers config calls
(`src/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py` of
github.com/AI-Hypercomputer/maxtext at MAXTEXT_COMMIT; `--import-py` reads the calls'
keyword arguments with ast, no code of it runs), Llama 4 Scout's from transformers'
`Llama4TextConfig` defaults (its docstring names Scout; `--import-defaults`), and the
configs piep ships (`model_trees/`, with their own source.json).

    python benchmarks/model_census.py --import-sh SCRIPT.sh   # one of MEGATRON's scripts
    python benchmarks/model_census.py --import-py HF_MODEL_CONFIGS_PY  # MaxText's configs
    python benchmarks/model_census.py --import-defaults   # configs transformers' classes hold
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep import api  # noqa: E402
from piep.core.artifacts import write_text  # noqa: E402
from piep.core.errors import PiepError  # noqa: E402
from piep.core.families import MOE_TYPES  # noqa: E402

CENSUS = ROOT / "model_trees" / "public"
REPORT = ROOT / "reports" / "model_census.md"
MLC_COMMIT = "79d603f085f50500e9509fa01785ffa7ecfaaa93"
# MLC LLM preset -> the Hugging Face model its config is of
PRESETS = {
    "llama3_1_8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama3_1_70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama3_2_1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama3_2_3b": "meta-llama/Llama-3.2-3B-Instruct",
    "mistral_7b_v03": "mistralai/Mistral-7B-Instruct-v0.3",
    "ministral3_3b_2512": "mistralai/Ministral-3-3B-Instruct-2512",
    "phi-3_5": "microsoft/Phi-3.5-mini-instruct",
    # MLC's preset "phi-4" holds Phi-4-mini's config (its _name_or_path; hidden 3072,
    # 32 layers), not phi-4 (14B)
    "phi-4": "microsoft/Phi-4-mini-instruct",
    "qwen2_7b": "Qwen/Qwen2-7B-Instruct",
    "qwen2.5_3b": "Qwen/Qwen2.5-3B-Instruct",
    "qwen3_0.6b": "Qwen/Qwen3-0.6B",
    "qwen3_1.7b": "Qwen/Qwen3-1.7B",
    "gemma3_1b_it": "google/gemma-3-1b-it",
    "gemma2_2b": "google/gemma-2-2b-it",
    "gemma2_9b": "google/gemma-2-9b-it",
    "gemma2_27b": "google/gemma-2-27b-it",
    "olmo2_7b": "allenai/OLMo-2-1124-7B-Instruct",
    "olmo2_13b": "allenai/OLMo-2-1124-13B-Instruct",
    "olmo2_32b": "allenai/OLMo-2-0325-32B-Instruct",
    "smollm2_360m": "HuggingFaceTB/SmolLM2-360M-Instruct",
    "internlm2_5_7b": "internlm/internlm2_5-7b-chat",
    "aya-23": "CohereForAI/aya-23-8B",
    "starcoder2": "bigcode/starcoder2-3b",
    "Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "qwen2moe": "Qwen/Qwen1.5-MoE-A2.7B-Chat",
    "deepseek_v2_lite": "deepseek-ai/DeepSeek-V2-Lite-Chat",
}
LLMPROF_COMMIT = "8434c8d19c396b2f95d92a67845a7c0a0e0dd512"
# LLM-Prof's names -> the Hugging Face model (the Qwen3 ones: its Llama and Qwen2.5
# configs are in the census already)
LLMPROF = {"Qwen3-4B": "Qwen/Qwen3-4B", "Qwen3-8B": "Qwen/Qwen3-8B",
           "Qwen3-14B": "Qwen/Qwen3-14B", "Qwen3-32B": "Qwen/Qwen3-32B",
           "Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B"}
# slime's Megatron-LM model scripts -> (the model, its model_type, the repository and
# commit the script was read at)
MEGATRON = {
    "glm4.5-106B-A12B.sh": ("zai-org/GLM-4.5-Air", "glm4_moe",
                            "vllm-project/vime@b332ffc2c80e204ad520f93daa0aa7d1e65294d8"),
    "glm4.5-355B-A32B.sh": ("zai-org/GLM-4.5", "glm4_moe",
                            "zyzshishui/slime@ffec53408dc6eac7ed6af9a17dc090e0458a7260"),
}
# Megatron-LM's model arguments -> config.json keys (flags: their value when present)
MEGATRON_KEYS = {
    "--num-layers": "num_hidden_layers", "--hidden-size": "hidden_size",
    "--ffn-hidden-size": "intermediate_size", "--num-attention-heads": "num_attention_heads",
    "--num-query-groups": "num_key_value_heads", "--kv-channels": "head_dim",
    "--vocab-size": "vocab_size", "--rotary-base": "rope_theta",
    "--rotary-percent": "partial_rotary_factor", "--num-experts": "n_routed_experts",
    "--moe-ffn-hidden-size": "moe_intermediate_size",
    "--moe-router-topk": "num_experts_per_tok",
    "--moe-router-topk-scaling-factor": "routed_scaling_factor",
}
# MaxText's Hugging Face configs (hf_model_configs.py: `transformers.XConfig(...)` calls,
# some of a `*_dict` literal) -> the model each is of
MAXTEXT_COMMIT = "14b30db0f9b9fdb22738fbbc34282aaa388269bc"
MAXTEXT = {"gemma3_12b_config": "google/gemma-3-12b-it",
           "gemma3_27b_config": "google/gemma-3-27b-it",
           "llama31_405b_config": "meta-llama/Llama-3.1-405B-Instruct",
           "qwen3_235b_a22b_thinking_2507_config": "Qwen/Qwen3-235B-A22B-Thinking-2507",
           "qwen3_coder_480b_a35b_config": "Qwen/Qwen3-Coder-480B-A35B-Instruct",
           "gpt_oss_20b_config": "openai/gpt-oss-20b",
           "gpt_oss_120b_config": "openai/gpt-oss-120b"}
# a config class MaxText calls without a model_type -> the model_type it stands for
MAXTEXT_TYPES = {"LlamaConfig": "llama", "Gemma3Config": "gemma3",
                 "Qwen3MoeConfig": "qwen3_moe", "GptOssConfig": "gpt_oss"}
# models whose transformers config class defaults are their configuration (its docstring
# says so) -> (the model_type, the class, the file in transformers' repository)
CLASS_DEFAULTS = {"meta-llama/Llama-4-Scout-17B-16E": (
    "Llama4TextConfig", "src/transformers/models/llama4/configuration_llama4.py")}
MEGATRON_FLAGS = {"--add-qkv-bias": ("attention_bias", True),
                  "--qk-layernorm": ("use_qk_norm", True),
                  "--untie-embeddings-and-output-weights": ("tie_word_embeddings", False)}
# the configs piep ships that are of 2025-26 deployments (model_trees/<name>)
SHIPPED = ("llama-3-8b", "llama-3-70b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
           "qwen2.5-72b", "mistral-small-24b")
WORKLOAD = {"batch": 1, "prompt_len": 512, "gen_len": 128}
TPS = (1, 2, 4, 8)


def import_presets(preset_file: Path) -> None:
    """Write PRESETS' configs from MLC LLM's model_preset.py (its dict literal, read with
    ast.literal_eval) and SOURCES.json."""
    tree = ast.parse(preset_file.read_text())
    presets = next(ast.literal_eval(n.value) for n in tree.body
                   if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                   and "MODEL_PRESETS" in ast.dump(n.targets[0] if isinstance(n, ast.Assign)
                                                   else n.target))
    sources = {}
    for key, hub in PRESETS.items():
        name = hub.split("/")[1]
        write_text(CENSUS / f"{name}.json", json.dumps(presets[key], indent=1) + "\n")
        sources[name] = {"hub_id": hub, "source": f"github.com/mlc-ai/mlc-llm@{MLC_COMMIT}: "
                         f"python/mlc_llm/model/model_preset.py MODEL_PRESETS[{key!r}]"}
    write_text(CENSUS / "SOURCES.json", json.dumps(sources, indent=1) + "\n")


def add_configs(configs: list[tuple[str, dict, str]]) -> None:
    """Write each (Hub ID, config, where it was read) into the census, named as the Hub
    names the model, and its source into SOURCES.json."""
    sources = json.loads((CENSUS / "SOURCES.json").read_text())
    for hub, cfg, source in configs:
        name = hub.split("/")[1]
        write_text(CENSUS / f"{name}.json", json.dumps(cfg, indent=1) + "\n")
        sources[name] = {"hub_id": hub, "source": source}
    write_text(CENSUS / "SOURCES.json", json.dumps(sources, indent=1, sort_keys=True) + "\n")


def import_markdown(md_file: Path) -> None:
    """Add LLMPROF's configs from LLM-Prof's Model_Config.md (a name line, then its JSON
    object) to the census and SOURCES.json."""
    text = md_file.read_text()
    decoder = json.JSONDecoder()
    configs = []
    for name, hub in LLMPROF.items():
        cfg, _ = decoder.raw_decode(text, text.index(f"{name}\n{{") + len(name) + 1)
        configs.append((hub, cfg, f"github.com/citsjtu2020/LLM-Prof@{LLMPROF_COMMIT}: "
                        f"sglang/Model_Config.md ({name})"))
    add_configs(configs)


def megatron_config(text: str, model_type: str) -> dict:
    """A config.json of the model a Megatron-LM script's MODEL_ARGS describe: each
    argument of MEGATRON_KEYS and MEGATRON_FLAGS, shell variables and $((a + b)) expanded;
    shared experts counted in routed experts' widths, the dense first layers read off
    `--moe-layer-freq [0]*N+[1]*M`."""
    env = dict(re.findall(r"^(\w+)=(\S+)$", text, flags=re.M))

    def value(word: str):
        word = re.sub(r"\$(\w+)", lambda m: env[m.group(1)], word)
        if word.startswith("$(("):  # (names inside an arithmetic expansion: no $)
            return sum(int(env.get(x, x)) for x in word.strip("$()").split("+"))
        return json.loads(word)
    words = text.split()
    cfg: dict = {"model_type": model_type}
    for i, word in enumerate(words):
        if word in MEGATRON_KEYS:
            cfg[MEGATRON_KEYS[word]] = value(words[i + 1] if "((" not in words[i + 1]
                                             else "".join(words[i + 1:i + 4]))
        elif word in MEGATRON_FLAGS:
            cfg.update([MEGATRON_FLAGS[word]])
        elif word == "--moe-layer-freq":
            cfg["first_k_dense_replace"] = int(env[re.match(r"\[0\]\*\$(\w+)",
                                                             words[i + 1]).group(1)])
        elif word == "--moe-shared-expert-intermediate-size":
            cfg["n_shared_experts"] = value(words[i + 1])
    cfg["n_shared_experts"] = cfg.get("n_shared_experts", 0) // cfg["moe_intermediate_size"]
    return cfg


def maxtext_configs(text: str) -> dict[str, tuple[dict, str]]:
    """MAXTEXT's configs from MaxText's hf_model_configs.py, read with ast (no code of it
    runs): variable -> (its keyword arguments as a config.json, what was restored). Where
    the comment above a dict says MaxText removed the quantization_config ("remove mxfp4
    quantization_config"), its quant_method is put back, as the Hub's checkpoint has it."""
    tree = ast.parse(text)
    lines = text.splitlines()
    assigned = {n.targets[0].id: n for n in tree.body
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    out = {}
    for var in MAXTEXT:
        call = assigned[var].value
        cfg: dict = {}
        restored = ""
        for kw in call.keywords:
            if kw.arg is not None:
                cfg[kw.arg] = ast.literal_eval(kw.value)
                continue
            literal = assigned[kw.value.id]
            cfg.update(ast.literal_eval(literal.value))
            above = " ".join(lines[max(0, literal.lineno - 3):literal.lineno - 1])
            removed = re.search(r"remove (\w+) quantization_config", above)
            if removed:
                cfg["quantization_config"] = {"quant_method": removed.group(1)}
                restored = (f"; the {removed.group(1)} quantization_config MaxText removed "
                            f"put back as its quant_method")
        cfg.setdefault("model_type", MAXTEXT_TYPES[call.func.attr])
        out[var] = (cfg, restored)
    return out


def import_maxtext(py_file: Path) -> None:
    """Add MAXTEXT's configs to the census and SOURCES.json."""
    add_configs([(MAXTEXT[var], cfg, f"github.com/AI-Hypercomputer/maxtext@{MAXTEXT_COMMIT}: "
                  f"src/MaxText/utils/ckpt_conversion/utils/hf_model_configs.py {var} (as a "
                  f"config.json: its keys, transformers' defaults for the rest{restored})")
                 for var, (cfg, restored) in maxtext_configs(py_file.read_text()).items()])


def import_class_defaults() -> None:
    """Add CLASS_DEFAULTS' models to the census: the installed transformers' config class
    with no argument, written as a config.json (`to_dict()`, less the keys every config
    class shares)."""
    import transformers
    shared = set(transformers.PretrainedConfig().to_dict())
    add_configs([(hub, {k: v for k, v in getattr(transformers, cls)().to_dict().items()
                        if k not in shared or k in ("model_type", "tie_word_embeddings")},
                  f"github.com/huggingface/transformers@v{transformers.__version__}: {path} "
                  f"{cls}() (its defaults, which its docstring gives as {hub}'s "
                  f"configuration)") for hub, (cls, path) in CLASS_DEFAULTS.items()])


def import_megatron(script: Path) -> None:
    """Add a MEGATRON script's model to the census and SOURCES.json."""
    hub, model_type, repo = MEGATRON[script.name]
    add_configs([(hub, megatron_config(script.read_text(), model_type),
                  f"github.com/{repo}: scripts/models/{script.name} (Megatron-LM arguments as "
                  f"a config.json: their values, transformers' defaults for the rest)")])


def entries() -> list[tuple[str, str, str]]:
    """(name, model argument, source) of every census config."""
    sources = json.loads((CENSUS / "SOURCES.json").read_text())
    out = [(name, str(CENSUS / f"{name}.json"), f"{s['hub_id']} ({s['source']})")
           for name, s in sorted(sources.items())]
    for name in SHIPPED:
        src = json.loads((ROOT / "model_trees" / name / "source.json").read_text())
        out.append((name, name, f"{src['url']} (model_trees/{name})"))
    return out


def _config(arg: str) -> dict:
    path = Path(arg) if arg.endswith(".json") else ROOT / "model_trees" / arg / "config.json"
    cfg = json.loads(path.read_text())
    return {**cfg, **(cfg.get("text_config") or {})}


def answer(arg: str) -> dict:
    """What piep answers of one config: the family, the smallest tp that fits and the
    prediction there (hf-eager, WORKLOAD), or the refusal."""
    cfg = _config(arg)
    moe = cfg.get("model_type") in MOE_TYPES or any(
        isinstance(cfg.get(k), int) and cfg[k] > 1
        for k in ("num_local_experts", "num_experts", "n_routed_experts"))
    row = {"model_type": cfg.get("model_type"), "moe": moe}
    problem = None
    # at each tp, the experts sharded by expert (ep = tp) where the tensor-parallel plan
    # is refused and a refusal names the expert-parallel one
    layouts = ((tp, ep) for tp in TPS for ep in dict.fromkeys((1, tp)))
    for tp, ep in layouts:
        if ep > 1 and (problem is None or f"ep={ep}" not in problem):
            continue
        try:
            doc = api.predict(arg, engine="hf-eager", tp=tp, ep=ep, **WORKLOAD)
        except PiepError as exc:
            problem = str(exc).splitlines()[0]
            if "does not fit" in problem or "divisible" in problem or "tp=" in problem:
                continue
            break
        return {**row, "answered": True, "tp": tp, **({"ep": ep} if ep > 1 else {}),
                "energy_j": doc["energy_j"], "time_s": doc["time_s"],
                "dtypes": doc.get("dtypes"), "flags": doc["flags"]}
    return {**row, "answered": False, "refusal": problem}


def served(arg: str) -> dict:
    """What piep answers of one config served by vLLM (`piep steady` on H100s, else on
    B200s: the GPUs its profiles were fitted on; vLLM's defaults, prompts of 256 tokens,
    outputs of 400): the first GPU and smallest tp that fit, and J per output token
    there, or the refusal."""
    problem = None
    for gpu in ("h100", "b200"):
        for tp in TPS:
            try:
                doc = api.steady(arg, gpu=gpu, tp=tp)
            except PiepError as exc:
                problem = str(exc).splitlines()[0]
                continue  # (a larger tp may fit, or divide its heads)
            return {"vllm_gpu": gpu, "vllm_tp": tp,
                    "vllm_j_per_token": doc["j_per_output_token"]}
    return {"vllm_refusal": problem}


def census() -> list[dict]:
    return [{"name": name, "source": src, **answer(arg), **served(arg)}
            for name, arg, src in entries()]


def summary(rows: list[dict]) -> str:
    dense = [r for r in rows if not r["moe"]]
    moe = [r for r in rows if r["moe"]]
    done, moe_done = sum(r["answered"] for r in dense), sum(r["answered"] for r in moe)
    return (f"{len(rows)} configs: {done} of {len(dense)} dense answered "
            f"({100 * done / len(dense):.0f} %); {moe_done} of {len(moe)} mixtures of "
            f"experts answered{' (the rest refused by name)' * (moe_done < len(moe))}; "
            f"served by "
            f"vLLM (piep steady, H100s or B200s): {sum('vllm_tp' in r for r in dense)} of "
            f"{len(dense)} dense, {sum('vllm_tp' in r for r in moe)} of {len(moe)} mixtures "
            f"of experts")


def report(rows: list[dict]) -> str:
    lines = ["# Model census", "",
             "Made by `python benchmarks/model_census.py --write`: each public config of "
             "`model_trees/public/` (sources in its SOURCES.json) and each shipped "
             "config of a 2025-26 deployment, read by piep; answered at the smallest tensor-"
             "parallel degree whose layout fits H200s (hf-eager, batch 1, prompt 512, 128 new "
             "tokens; a mixture of experts whose family transformers shards by its "
             "expert-parallel plan only, at ep = tp), or refused in one line; and served "
             "by vLLM (`piep steady` on H100s, "
             "else B200s, at the smallest tp that fits: vLLM's defaults, prompts of 256 "
             "tokens, outputs of 400).", "", f"**{summary(rows)}.**", "",
             "| model | model_type | answer | vLLM held full | source |",
             "|---|---|---|---|---|"]
    for r in rows:
        ans = (f"tp={r['tp']}{' ep=' + str(r['ep']) if r.get('ep') else ''}: "
               f"{r['energy_j']:.0f} J, {r['time_s']:.2f} s"
               + (f" ({', '.join(r['flags'])})" if r["flags"] else "")) if r["answered"] \
            else f"refused: {r['refusal']}"
        vllm = (f"{r['vllm_gpu']} tp={r['vllm_tp']}: {r['vllm_j_per_token']:.3f} J/token"
                if "vllm_tp" in r else f"refused: {r['vllm_refusal']}")
        lines.append(f"| {r['name']} | {r['model_type']} | {ans.replace('|', '/')} | "
                     f"{vllm.replace('|', '/')} | {r['source']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if "--import-py" in sys.argv:
        import_maxtext(Path(sys.argv[sys.argv.index("--import-py") + 1]))
        print(f"added {len(MAXTEXT)} configs to {CENSUS.relative_to(ROOT)}")
        return 0
    if "--import-defaults" in sys.argv:
        import_class_defaults()
        print(f"added {len(CLASS_DEFAULTS)} configs to {CENSUS.relative_to(ROOT)}")
        return 0
    if "--import-sh" in sys.argv:
        import_megatron(Path(sys.argv[sys.argv.index("--import-sh") + 1]))
        print(f"added its config to {CENSUS.relative_to(ROOT)}")
        return 0
    if "--import-md" in sys.argv:
        import_markdown(Path(sys.argv[sys.argv.index("--import-md") + 1]))
        print(f"added {len(LLMPROF)} configs to {CENSUS.relative_to(ROOT)}")
        return 0
    if "--import" in sys.argv:
        import_presets(Path(sys.argv[sys.argv.index("--import") + 1]))
        print(f"wrote {len(PRESETS)} configs to {CENSUS.relative_to(ROOT)}")
        return 0
    rows = census()
    if "--write" in sys.argv:
        write_text(REPORT, report(rows))
        print(f"wrote {REPORT.relative_to(ROOT)}")
        return 0
    for r in rows:
        what = f"tp={r['tp']} {r['energy_j']:8.1f} J {r['time_s']:6.2f} s {r['flags']}" \
            if r["answered"] else f"refused: {r['refusal'][:110]}"
        print(f"{r['name']:32s} {r['model_type']!s:12s} {what}")
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
