"""The plan model's layers are the model zoo's torch modules: a configuration's matrix-product FLOPs
(and, for Llama, its weights) equal those of the same configuration exported with torch.onnx and
imported as an op graph."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxscript")

from placement_gym.datasets.architectures import export_graph, gpt2, llama  # noqa: E402
from placement_gym.graph.opgraph import CATEGORIES  # noqa: E402
from placement_gym.plans import Plan, TransformerModel  # noqa: E402
from placement_gym.plans.layer import layer_ops  # noqa: E402

GPT2_VOCAB, LLAMA_VOCAB = 50257, 32000  # the zoo's vocabularies (placement_gym/export/models)


@pytest.mark.parametrize("family, build, sizes, vocab", [
    ("llama", llama, dict(layers=2, hidden=128, heads=8, kv_heads=2, batch=2, seq=32), LLAMA_VOCAB),
    ("gpt", gpt2, dict(layers=3, hidden=96, heads=4, batch=3, seq=16), GPT2_VOCAB),
])
def test_a_configuration_s_products_are_its_exported_graph_s(family, build, sizes, vocab):
    graph = export_graph(build(sizes), f"{family}-check")
    exported = graph.flops[graph.category == CATEGORIES.index("matmul")].sum()
    model = TransformerModel(family, layers=sizes["layers"], hidden=sizes["hidden"], heads=sizes["heads"],
                             seq=sizes["seq"], vocab=vocab, kv_heads=sizes.get("kv_heads", 0))
    # the torch modules materialise the attention scores: the plan's materialised form, one rank
    plan = Plan(global_batch=sizes["batch"], microbatch_size=sizes["batch"], fused_attention=False)
    ops, _ = layer_ops(model, plan)
    per_layer = sum(op.flops for op in ops if op.category in ("matmul", "scores"))
    head = 2 * sizes["batch"] * sizes["seq"] * sizes["hidden"] * vocab
    assert exported == pytest.approx(model.layers * per_layer + head, rel=1e-12)
    if family == "llama":  # no biases or learned positions: every weight is the configuration's
        assert graph.param_bytes.sum() / 4 == model.parameters()
