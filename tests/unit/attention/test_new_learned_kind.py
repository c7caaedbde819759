"""A third learned kind, defined in this file and nowhere else: one class and
its registration.  ``lband``: a band whose half-width is learned per head,
w_h = MAX · sigmoid(θ_h).  Training realises the soft band
M_ij = sigmoid((w_h − |i − j|)/τ), evaluation the band 1[|i − j| ≤ w_h]; its
penalty is the mean w_h/MAX (weighed by ``--learned-lambda lband=W``) and it
logs its mean width as a (sum, count) rate.

Through the plugin's own extension points only, it builds, trains with its
penalty in the loss and its rate logged, keeps its gradients under
``--checkpoint-activations``, stays finite in fp16, exports as a fixed mask,
and is refused when a run resumes it as another kind; the slow test does it
through plain ``fairseq-train --user-dir``: run as a script, this file
registers the kind and then is ``fairseq-train``."""

import sys
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from fairseq_local.attention.learned import LearnedKind, Realised, register_learned_kind, unregister_learned_kind
from fairseq_local.attention.masks import no_params

MAX = 4.0


@register_learned_kind("lband", ("lband", "lband"))
@dataclass(frozen=True)
class LearnedBand(LearnedKind):
    """``lband``: a band of learned half-width w = MAX·sigmoid(θ), one θ per head
    and layer.  As an export (:meth:`exportable`) an instance holds a trained w."""

    width: float = 0.0
    rates = {"lband_width": ("lband_width_sum", "lband_heads")}
    max_len = 64
    ends = False
    kind = "lband"

    @classmethod
    def from_params(cls, kind, params):
        no_params(kind, params)
        return cls()

    def __str__(self) -> str:
        return "lband"

    def before_softmax(self, mode: str) -> bool:
        return True

    @classmethod
    def build(cls, b, layer, heads) -> nn.Module:
        params = nn.Module()
        params.theta = nn.Parameter(torch.zeros(len(heads)))
        return params

    @staticmethod
    def widths(params: nn.Module) -> torch.Tensor:
        return MAX * torch.sigmoid(params.theta.float())

    @classmethod
    def realise(cls, params, specs, x, positions, tau, padding_mask) -> Realised:
        w = cls.widths(params)[None, :, None, None]  # (1, n, 1, 1)
        d = (positions[:, :, None] - positions[:, None, :]).abs().float()[:, None]  # (B, 1, T, T)
        real = ((positions[:, :, None] >= 0) & (positions[:, None, :] >= 0))[:, None]
        m = torch.sigmoid((w - d) / tau) if params.training else (d <= w).float()
        return Realised(m * real)

    @classmethod
    def penalty(cls, cfg, uses):
        width = sum(cls.widths(use.params).sum() for use in uses)
        heads = sum(len(use.heads) for use in uses)
        return width / (MAX * heads), {"lband_width_sum": width.detach(), "lband_heads": float(heads)}

    @classmethod
    def exportable(cls, layout, state, prefix):
        out = {}
        for l, layer in enumerate(layout):
            heads = [h for h, m in enumerate(layer.masks) if isinstance(m, cls)]
            if heads:
                theta = state[f"{prefix}{l}.self_attn.learned.lband.theta"].float()
                out.update({(l, h): cls(float(MAX * torch.sigmoid(theta[k]))) for k, h in enumerate(heads)})
        return out

    def matrix(self, n: int, what: str = "hard") -> torch.Tensor:
        d = (torch.arange(n)[:, None] - torch.arange(n)[None]).abs().float()
        return (d <= self.width).float() if what == "hard" else torch.sigmoid(self.width - d)


if __name__ == "__main__":  # plain fairseq-train, with the kind registered
    from fairseq_cli.train import cli_main

    sys.argv[0] = "fairseq-train"
    sys.exit(cli_main())
unregister_learned_kind("lband")  # in the test session, registered while this file's tests run (below)

from fairseq_local.attention.config import attention_options  # noqa: E402
from fairseq_local.attention import export as export_masks  # noqa: E402
from fairseq_local_cli import export as export_cli  # noqa: E402
from fairseq_local.models.transformer import local_encoder  # noqa: E402
from helpers import ENV, ROOT, TINY, USER_DIR  # noqa: E402
from helpers.precision import PenaltySpy, fp16_optimizer_training, one_thread, setup  # noqa: E402,F401

LAYOUT = "[lband*4,band-1,global*3]*6"


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_learned_kind("lband", ("lband", "lband"))(LearnedBand)
    yield
    unregister_learned_kind("lband")

PENALTY = {"learned_lambda": "lband=0.5", "dam_lambda": 0.0, "aaa_alpha": 0.0, "gate_lambda": 0.0}


def nmt(**overrides):
    return setup("transformer_local", {"attn_layout": LAYOUT, **overrides}, **PENALTY)


def test_the_kind_is_one_module_per_layer_in_the_plan_and_the_state_dict():
    model, _, _ = nmt()
    attn = local_encoder(model).attention_modules()[0]
    assert [(g.kind, g.heads) for g in attn.plan.learned] == [(LearnedBand, (0, 1, 2, 3))]
    assert attn.plan.pre_learned == (0, 1, 2, 3) and list(attn.learned) == ["lband"]
    assert "encoder.layers.5.self_attn.learned.lband.theta" in model.state_dict()


def test_its_penalty_is_in_the_loss_and_its_rate_is_logged(one_thread):
    model, crit, sample = nmt()
    with torch.no_grad():
        for attn in local_encoder(model).attention_modules():
            attn.learned["lband"].theta.copy_(torch.tensor([-1.0, 0.0, 1.0, 2.0]))
    spy = PenaltySpy(crit)
    model.train()
    torch.manual_seed(1)
    loss, size, log = crit(model, sample)
    penalty = float(spy.terms.penalties["lband"])
    expected = float(torch.sigmoid(torch.tensor([-1.0, 0.0, 1.0, 2.0])).mean())
    assert penalty == pytest.approx(expected, rel=1e-6)
    assert log["lband_loss"] == pytest.approx(0.5 * expected * size, rel=1e-5)
    assert log["lband_width_sum"] / log["lband_heads"] == pytest.approx(MAX * expected, rel=1e-6)
    assert float(spy.total) == pytest.approx(log["lband_loss"], rel=1e-6)  # the only penalty, in the loss
    loss.backward()
    theta = local_encoder(model).attention_modules()[0].learned["lband"].theta
    assert theta.grad is not None and theta.grad.abs().sum() > 0


def test_logged_rate_reduces_as_a_sum_over_counts():
    from fairseq import metrics

    from fairseq_local.criteria.penalized import SparsityLoss

    with metrics.aggregate() as agg:
        SparsityLoss.reduce_sparsity_metrics([{"lband_width_sum": 3.0, "lband_heads": 2.0, "sample_size": 1},
                                              {"lband_width_sum": 1.0, "lband_heads": 2.0, "sample_size": 1}])
    assert agg.get_smoothed_values()["lband_width"] == pytest.approx(1.0)


def _gradients(checkpoint: bool, state=None):
    model, crit, sample = nmt(checkpoint_activations=checkpoint, dropout=0.1, attention_dropout=0.1)
    if state is not None:
        model.load_state_dict(state)
    model.train()
    torch.manual_seed(7)
    loss, _, _ = crit(model, sample)
    loss.backward()
    return model.state_dict(), float(loss), {n: p.grad.clone() for n, p in model.named_parameters()
                                             if p.grad is not None}


def test_checkpointed_gradients_equal_plain_ones(one_thread):
    state, loss, plain = _gradients(False)
    _, ckpt_loss, ckpt = _gradients(True, state)
    assert ckpt_loss == pytest.approx(loss, rel=1e-6)
    assert plain.keys() == ckpt.keys() and any(".lband.theta" in n for n in plain)
    for name, g in plain.items():
        assert float((ckpt[name] - g).abs().max()) <= 1e-5 * max(1.0, float(g.abs().max())), name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_finite_in_half_precision(one_thread, dtype):
    model, crit, sample = nmt()
    spy = PenaltySpy(crit)
    skipped, losses, _ = fp16_optimizer_training(model, crit, sample, dtype, steps=8)
    assert skipped <= 1 and all(torch.isfinite(torch.tensor(losses)))
    penalty = spy.terms.penalties["lband"]
    assert penalty.dtype == torch.float32 and torch.isfinite(penalty)


def test_exports_as_a_fixed_band(tmp_path):
    model, _, _ = nmt()
    with torch.no_grad():
        for attn in local_encoder(model).attention_modules():
            attn.learned["lband"].theta.copy_(torch.tensor([-9.0, 0.0, 0.5, 9.0]))  # w = 0.0005, 2, 2.49, 3.9995
    options = attention_options({"attn_layout": LAYOUT})
    masks = export_masks.learned_masks(options, model.state_dict())
    assert sorted(masks) == [(l, h) for l in range(6) for h in range(4)]
    entries = export_masks.export(masks, 8, None)
    d = (torch.arange(8)[:, None] - torch.arange(8)[None]).abs()
    for h, w in enumerate((0, 2, 2, 3)):
        assert torch.equal(entries[f"3.{h}"]["matrix"], d <= w), h
    layout = export_masks.stage2_layout(options.layout, masks)
    assert layout == "[file*4,band-1,global*3]*6"


def fairseq_train(data, save, *extra):
    import subprocess

    cmd = [sys.executable, __file__, str(data), "--user-dir", USER_DIR, "--arch", "transformer_local",
           "--share-all-embeddings", "--optimizer", "adam", "--lr-scheduler", "inverse_sqrt",
           "--criterion", "label_smoothed_cross_entropy_with_sparsity", "--label-smoothing", "0.1",
           "--save-dir", str(save), "--no-epoch-checkpoints", "--cpu", *TINY, *extra]
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_trains_exports_and_refuses_another_kind_through_fairseq_train(tiny_data, tmp_path, capsys):
    save = tmp_path / "run"
    r = fairseq_train(tiny_data, save, "--attn-layout", LAYOUT, "--learned-lambda", "lband=0.5",
                      "--max-update", "6")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "lband_loss" in out and "lband_width" in out
    ckpt = save / "checkpoint_last.pt"
    assert export_cli.main([str(ckpt), "--out", str(tmp_path / "masks.pt"), "--n", "16"]) is None
    printed = capsys.readouterr().out
    assert "wrote 24 masks" in printed and "--attn-layout '[file*4,band-1,global*3]*6'" in printed
    r = fairseq_train(tiny_data, save, "--attn-layout", "[band-2*4,band-1,global*3]*6", "--max-update", "8")
    assert r.returncode != 0 and "cannot resume" in r.stderr and "--attn-layout" in r.stderr, r.stderr[-2000:]


def test_a_learned_spec_that_no_kind_realises_is_refused():
    from fairseq_local.attention.masks import MaskSpecError, register_mask_kind, unregister_mask_kind
    from fairseq_local.attention.masks.learned import LearnedMask

    @register_mask_kind("orphan", "orphan")
    @dataclass(frozen=True)
    class Orphan(LearnedMask):
        @classmethod
        def from_params(cls, kind, params):
            return cls()

        def __str__(self) -> str:
            return "orphan"

    try:
        with pytest.raises(MaskSpecError, match="'orphan' is learned, but Orphan is not a registered learned kind"):
            nmt(attn_layout="[orphan,global*7]*6")
    finally:
        unregister_mask_kind("orphan")
