"""GPU tests: run on the device machine only (`pytest -m gpu`), logged under
calibration/h200/e2e/logs/."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("name", ["llama-2-7b", "qwen2.5-7b"])
def test_graph_and_eager_produce_identical_tokens(name):
    from piep.core.models import load_model
    from piep.sampling.generate import Generator
    from piep.sampling.model import StageModel, Topology
    spec = load_model(name)
    topo = Topology()
    tokens = {}
    prompt = torch.randint(0, spec.vocab_size, (4, 64), device="cuda",
                           generator=torch.Generator(device="cuda").manual_seed(3))
    model = StageModel(spec, topo, batch=4, max_len=64 + 32, device="cuda", seed=1)
    for mode in ("graph", "eager"):
        g = Generator(model, topo, prompt_len=64, gen_len=32, mode=mode, prompt=prompt)
        g.capture()
        g.prefill()
        g.check()
        g.decode()
        torch.cuda.synchronize()
        tokens[mode] = g.tokens.cpu()
        assert g.graph is not None or mode == "eager"
    agree = (tokens["graph"] == tokens["eager"]).float().mean().item()
    print(f"{name}: graph/eager token agreement {agree:.4f}")
    assert torch.equal(tokens["graph"], tokens["eager"])
