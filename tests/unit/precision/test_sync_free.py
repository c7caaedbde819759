"""A forward pass without host synchronisation (issue 18, point 8).

The attention layers of every kind run on the ``meta`` device (parameters,
buffers and inputs there, with a key padding mask): a tensor there has no
values, so anything that reads one back to the host, ``.item()``,
``.tolist()``, ``bool()``/``if tensor``, ``int()``, or an operator whose output
shape depends on values (``unique``, ``nonzero``, boolean indexing), raises.
On a GPU each of those stalls the stream, per layer per update.

Layers run as the encoder runs them: two layers of one layout (a DAM mask
shared by both, gathered once through the per-forward memo) inside an
:func:`attention_context` with records and memo, as the encoder opens it.  FlexAttention (``--attn-impl flex``) is left to its own
tests.  The seeded random kinds (``random``, ``longformer``, ``bigbird``) are
in: they index one 128×128 tile on the device by the positions
(``masks/seeded.py``).

The sparsity terms: the penalty path is checked, not the logging values,
which must be read back once to be logged.  The pair counts of every record
(:meth:`AttentionRecord.kept`, behind ρ and ``--dam-l1 density``), DAM's
‖M‖₁ and the gates' L0 term run on ``meta`` as they are; then
:func:`sparsity_terms` runs on ``meta`` with reads of a meta tensor answered
by a dummy and recorded, and no read may come from inside the functions that
compute a penalty.

A second check: no host data copied to the device in a warm forward pass
(``torch.tensor(list, device=...)``; index tensors belong in buffers).
"""

import dataclasses
import traceback

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from helpers import padding_mask

from fairseq_local.attention.build import AttentionBuilder
from fairseq_local.attention.config import AttentionConfig, attention_options
from fairseq_local.attention.context import attention_context
from fairseq_local.attention.penalties import sparsity_terms

META = torch.device("meta")
LAYERS = {
    "global": "global*2",
    "local": "band-1,band-2,local-3,prev-1,next-2,identity",
    "fixed-mixed": "band-1,global,prev-2,identity",
    "tied": "band-1@a,prev-1@a,next-1@a,global@b,band-2@b,identity@b",
    "sparse": "star,logsparse,strided-4,fixed-4-1,local-2+global-1",
    "seeded": "longformer-2-2,bigbird-1-2-2,random-3,global",
    "dam-u": "dam-u*2",
    "dam-s": "dam-s*2",
    "aaa": "aaa*2",
    "gated": "global:gate,band-1:gate,global",
    "mixed-learned": "dam-u,dam-s,aaa,global:gate,band-1@t,prev-1@t",
}


def layers(heads: str, mode: str, impl: str, dam_l1: str = "density"):
    """Two layers of ``[heads]`` (head size 4), built as the encoder builds them."""
    cfg = attention_options(AttentionConfig(attn_layout=f"[{heads}]*2", mask_mode=mode, attn_impl=impl, dam_l1=dam_l1))
    H = len(cfg.layout[0].heads)
    build = AttentionBuilder(cfg, 4 * H, 2, H, max_positions=32)
    torch.manual_seed(0)
    return cfg, [build(i) for i in range(2)], 4 * H


def forward(mods, x, pad):
    with attention_context(records=True, memo=True) as ctx:
        for m in mods:
            x = x + m(x, key_padding_mask=pad)[0]
    return x, ctx.records


def meta_inputs(T, B, d, padded=True):
    x = torch.empty(T, B, d, device=META)
    return x, (torch.empty(B, T, dtype=torch.bool, device=META) if padded else None)


# --attn-impl window changes the path of layers with only window and global heads
STRUCTURED = ("global", "local", "fixed-mixed", "tied")
KIND_IMPL = [(k, "dense") for k in LAYERS] + [(k, "window") for k in STRUCTURED]


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("kind, impl", KIND_IMPL)
def test_forward_on_meta(kind, impl, mode, train):
    cfg, mods, d = layers(LAYERS[kind], mode, impl)
    mods = [m.to(META).train(train) for m in mods]
    for padded in (True, False):
        x, pad = meta_inputs(11, 3, d, padded)
        out, records = forward(mods, x, pad)
        assert out.device == META and out.shape == (11, 3, d)
        assert len(records) == 2


class Reads(TorchDispatchMode):
    """Answers reads of meta tensors (``.item()``, ``float()``, ``bool()``)
    with 0 and keeps the Python stack of each."""

    def __init__(self):
        super().__init__()
        self.stacks = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.stacks.append(traceback.extract_stack()[:-1])
            return 0
        return func(*args, **(kwargs or {}))


PENALTY_FUNCTIONS = {"kept", "l1", "values", "l0", "pattern_count", "_window_sum", "pair_count_table",
                     "gather", "_gather", "real"}


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("kind", ["dam-u", "dam-s", "aaa", "gated", "mixed-learned", "local", "sparse"])
def test_penalties_on_meta(kind, mode):
    for convention in ("density", "sum"):
        cfg, mods, d = layers(LAYERS[kind], mode, "dense", dam_l1=convention)
        # records of a forward pass on the CPU (this test does not need a sync-free
        # forward), then the layers and the records' tensors on meta
        torch.manual_seed(1)
        _, records = forward([m.train() for m in mods], torch.randn(9, 2, d), padding_mask([9, 6], left_pad=True))
        mods = [m.to(META) for m in mods]
        dams = {id(m): m.learned["dam"] if "dam" in m.learned else [] for m in mods}
        for m in mods:
            for dam in dams[id(m)]:
                dam.resample()  # this update's noise, on the device
        records = [dataclasses.replace(r, **{f.name: getattr(r, f.name).to(META) for f in dataclasses.fields(r)
                                             if isinstance(getattr(r, f.name), torch.Tensor)},
                                       realised={k: dataclasses.replace(v, **{f.name: getattr(v, f.name).to(META)
                                                                              for f in dataclasses.fields(v)
                                                                              if getattr(v, f.name) is not None})
                                                 for k, v in r.realised.items()}) for r in records]
        # the pieces, strictly: no read at all
        for rec in records:
            kept = rec.kept(rec.real())
            assert kept.device == META and kept.shape == (2, rec.module.num_heads) and kept.dtype == torch.float32
        for m in mods:
            for dam in dams[id(m)]:
                assert dam.l1(m.tau).device == META
            if m.gates is not None:
                assert m.gates.l0().device == META
        # the whole function, its logging reads answered
        reads = Reads()
        tolist = torch.Tensor.tolist

        def fake_tolist(t):
            if t.device == META:
                reads.stacks.append(traceback.extract_stack()[:-1])
                return torch.zeros(t.shape, device="cpu").tolist()
            return tolist(t)

        torch.Tensor.tolist = fake_tolist
        try:
            with reads:
                terms = sparsity_terms(cfg, mods, records)
        finally:
            torch.Tensor.tolist = tolist
        learned = any(m.plan.learned_heads or m.gates is not None for m in mods)
        penalties = [t for t in (terms.penalties.get("dam"), terms.hinge_rho("aaa"), terms.gate) if t is not None]
        assert bool(penalties) == learned
        for t in penalties:
            assert t.device == META and t.numel() == 1 and t.dtype == torch.float32 and t.requires_grad
        inside = [s for s in reads.stacks if any(f.name in PENALTY_FUNCTIONS for f in s)]
        assert not inside, "reads in the penalty path:\n" + "\n".join(
            f"{s[-1].filename}:{s[-1].lineno} {s[-1].line}" for s in inside)


class HostData(TorchDispatchMode):
    """Keeps the operators that take host data into a meta computation: a
    tensor made from Python data (``torch.tensor(...)``), or a non-meta tensor
    with elements."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        flat, _ = tree_flatten((args, kwargs or {}))
        host = [t for t in flat if isinstance(t, torch.Tensor) and t.device != META and t.dim() > 0]
        if func is torch.ops.aten.lift_fresh.default or host:
            frames = [f for f in traceback.extract_stack()[:-1] if "fairseq_local" in f.filename]
            where = f"{frames[-1].filename.split('fairseq_local/')[-1]}:{frames[-1].lineno}" if frames else "?"
            self.seen.append(f"{func} at {where}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("kind, impl", KIND_IMPL)
def test_no_host_data_in_a_warm_forward(kind, impl, mode):
    cfg, mods, d = layers(LAYERS[kind], mode, impl)
    mods = [m.to(META).train() for m in mods]
    x, pad = meta_inputs(13, 2, d)
    for _ in range(2):  # the first pass may fill per-length caches on the device
        host = HostData()
        with host:
            _, records = forward(mods, x, pad)
            for rec in records:
                rec.kept(rec.real())  # the pair counts behind the penalties too
    assert not host.seen, "host data in a warm forward pass:\n" + "\n".join(dict.fromkeys(host.seen))
