"""Checkpoints saved before learned kinds held a layer's DAM α at
``self_attn.dam.K.alpha`` and its AAA selector at ``self_attn.axis.``; they
load into today's models (``self_attn.learned.dam.``, ``.learned.aaa.``) and
export as before."""

import torch

from fairseq_local.attention.config import attention_options
from fairseq_local.attention.export import export, learned_masks
from helpers.precision import setup

LAYOUT = "[dam-s,aaa,dam-u,global*5]*6"


def legacy(state):
    """``state`` as a checkpoint saved before learned kinds holds it."""
    return {k.replace(".learned.dam.", ".dam.").replace(".learned.aaa.", ".axis."): v for k, v in state.items()}


def test_a_state_dict_saved_before_kinds_loads_into_the_same_model():
    model, _, _ = setup("transformer_local", {"attn_layout": LAYOUT})
    old = legacy(model.state_dict())
    assert any(".self_attn.dam." in k for k in old) and any(".self_attn.axis." in k for k in old)
    fresh, _, _ = setup("transformer_local", {"attn_layout": LAYOUT}, seed=5)
    assert not torch.equal(fresh.encoder.layers[0].self_attn.learned["aaa"].fc.weight,
                           model.encoder.layers[0].self_attn.learned["aaa"].fc.weight)
    fresh.load_state_dict(old)  # fairseq's load: upgrade_state_dict_named renames, strict
    for (name, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert not torch.is_tensor(a) or torch.equal(a, b), name


def test_a_legacy_checkpoint_exports_the_same_masks():
    model, _, _ = setup("transformer_local", {"attn_layout": LAYOUT})
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1 and p.numel() > 8:  # the DAM α
                p.normal_()
    state, options = model.state_dict(), attention_options({"attn_layout": LAYOUT})
    new, old = export(learned_masks(options, state), 10, None), export(learned_masks(options, legacy(state)), 10, None)
    assert sorted(new) == sorted(old) == [f"{l}.{h}" for l in range(6) for h in (0, 2)]
    assert all(torch.equal(new[k]["matrix"], old[k]["matrix"]) for k in new)
    assert {e["kind"] for e in new.values()} == {"dam-s", "dam-u"} and any(not e["matrix"].all() for e in new.values())
