"""The RoBERTa archs: weight counts (Pande et al. Table 4), parameter parity
with fairseq's roberta_base, padding invariance, deterministic evaluation,
sparsity terms, initialisation."""

import pytest
import torch

from fairseq_local.models import ROBERTA_ARCHS, build_roberta, encoder_attention_weight_count
from fairseq_local.models.transformer import local_encoder
from fairseq_local.attention.learned import AxisSelector

# 12 layers of 12 heads (the named archs fix the layout), tiny otherwise.
TINY = dict(encoder_embed_dim=48, encoder_ffn_embed_dim=96, max_positions=64, dropout=0.0, attention_dropout=0.0)
NAMED = [cfg.arch for cfg in ROBERTA_ARCHS]

# Pande et al. §5.5 / Table 4 at BERT-base size (seeds README).
TABLE4_COUNTS = {
    "roberta_local_base": 28_311_552,
    "roberta_band2": 28_311_552,
    "roberta_band6": 28_311_552,
    "roberta_band6_all_tied": 14_254_080,
    "roberta_band6_132_tied": 15_433_728,
    "roberta_band6_120_tied": 16_613_376,
}


@pytest.mark.parametrize("arch", list(TABLE4_COUNTS))
def test_table4_attention_weight_counts(arch):
    assert encoder_attention_weight_count(build_roberta(arch)) == TABLE4_COUNTS[arch]


def test_all_global_base_has_the_parameters_of_roberta_base():
    ours, stock = build_roberta("roberta_local_base", vocab_size=300), build_roberta("roberta_base", vocab_size=300)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(ours) == count(stock) == 86_273_580
    # Same tensors apart from Wq/Wk being split per head.
    shapes = lambda m: sorted(tuple(p.shape) for n, p in m.named_parameters()  # noqa: E731
                              if "q_proj" not in n and "k_proj" not in n)
    assert shapes(ours) == shapes(stock)


def test_large_dimensions():
    model = build_roberta("roberta_local_large", dict(encoder_embed_dim=64, encoder_ffn_embed_dim=64))
    encoder = local_encoder(model)
    assert len(encoder.layers) == 24 and encoder.layers[0].self_attn.num_heads == 16


def test_named_arch_layouts_are_data():
    tied = local_encoder(build_roberta("roberta_band6_120_tied", TINY))
    shared = tied.layers[0].self_attn.qk[0]
    assert all(tied.layers[l].self_attn.qk[0] is shared for l in range(10))
    assert tied.layers[10].self_attn.num_groups == 12 and tied.layers[10].self_attn.qk[0] is not shared
    assert {str(m) for l in tied.layers for m in l.self_attn.masks} == {"band-6"}
    # The layout can still be overridden, and bad dimensions are a one-line error.
    local = local_encoder(build_roberta("roberta_band2", dict(TINY, attn_layout="[band-1*12]*12")))
    assert str(local.layers[0].self_attn.masks[0]) == "band-1"
    with pytest.raises(ValueError, match="layers"):
        build_roberta("roberta_band2", dict(TINY, encoder_layers=6))


def test_fairseq_flags_override_dimensions():
    model = build_roberta("roberta_dam_s", dict(TINY, encoder_ffn_embed_dim=80))
    assert local_encoder(model).layers[0].fc1.out_features == 80
    assert model.args.encoder_embed_dim == 48 and model.args.mask_mode == "pre"


def _tokens(lengths, pad=1, bos=0, eos=2, vocab=64, seed=0):
    """(B, T) right-padded RoBERTa inputs: <s> w... </s> pad..."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    out = torch.full((len(lengths), T), pad, dtype=torch.long)
    for b, n in enumerate(lengths):
        out[b, :n] = torch.randint(4, vocab, (n,), generator=g)
        out[b, 0], out[b, n - 1] = bos, eos
    return out


@pytest.mark.parametrize("mode", ["post", "pre"])
@pytest.mark.parametrize("arch", NAMED + ["roberta_local_base"])
def test_padding_invariance(arch, mode):
    torch.manual_seed(0)
    model = build_roberta(arch, dict(TINY, mask_mode=mode)).eval()
    for module in model.modules():  # open DAM masks a little and use biases too
        if hasattr(module, "alpha"):
            torch.nn.init.normal_(module.alpha, std=2.0)
    lengths = [9, 14, 5]
    batch = _tokens(lengths)
    with torch.no_grad():
        features, extra = model(batch, features_only=True)
        for b, n in enumerate(lengths):
            alone, _ = model(batch[b:b + 1, :n], features_only=True)
            torch.testing.assert_close(features[b, :n], alone[0], atol=1e-5, rtol=1e-5)
    assert len(extra["sparsity"]) == 12


@pytest.mark.parametrize("arch", ["roberta_dam_u", "roberta_dam_s", "roberta_aaa", "roberta_head_gates"])
def test_evaluation_is_deterministic(arch):
    model = build_roberta(arch, TINY).eval()
    batch = _tokens([12, 7])
    with torch.no_grad():
        a, b = model(batch)[0], model(batch)[0]
    assert torch.equal(a, b)
    model.train()
    with torch.no_grad():
        c, d = model(batch)[0], model(batch)[0]
    assert not torch.equal(c, d)  # noise in training


def test_sparsity_terms_pulled_from_the_output():
    batch = _tokens([10, 6])
    dam = build_roberta("roberta_dam_u", TINY).train()
    terms = dam.get_sparsity_terms(dam(batch))
    # One DAM mask per head, shared by the 12 layers (SparseBERT §3.1): 12 masks
    # of 64 x 64 logits, each summed once.
    assert len({id(d) for l in local_encoder(dam).layers for d in l.self_attn.learned["dam"]}) == 12
    assert "dam" in terms.penalties and terms.penalties["dam"].requires_grad
    assert terms.hinge_rho("aaa") is None and terms.gate is None
    base = build_roberta("roberta_local_base", TINY)
    terms = base.get_sparsity_terms(base(batch))
    assert "dam" not in terms.penalties and terms.hinge_rho("aaa") is None and terms.gate is None
    aaa = build_roberta("roberta_aaa", TINY).train()
    assert aaa.get_sparsity_terms(aaa(batch)).hinge_rho("aaa") is not None
    gates = build_roberta("roberta_head_gates", TINY).train()
    assert gates.get_sparsity_terms(gates(batch)).gate is not None


def test_bert_initialisation_except_the_axis_selector():
    model = build_roberta("roberta_aaa", dict(TINY, encoder_embed_dim=768, encoder_ffn_embed_dim=64))
    attn = local_encoder(model).layers[0].self_attn
    # init_bert_params: N(0, 0.02) for every Linear, as in stock RoBERTa ...
    assert abs(float(attn.qk[0].q_proj.weight.std()) - 0.02) < 0.002
    assert abs(float(attn.v_proj.weight.std()) - 0.02) < 0.001
    # ... but the AAA selector keeps its Xavier-uniform init (bound sqrt(6/770)).
    selector = next(m for m in model.modules() if isinstance(m, AxisSelector))
    assert float(selector.fc.weight.abs().max()) > 0.08 and torch.all(selector.fc.bias == 0)


def test_ends_are_the_special_tokens():
    """<s> is position 0 and </s> the last real position, so DAM_s keeps
    their rows and columns on (SparseBERT §3.1) in a padded batch."""
    model = build_roberta("roberta_dam_s", TINY).eval()
    for module in model.modules():
        if hasattr(module, "alpha"):
            torch.nn.init.constant_(module.alpha, -5.0)  # every learned entry off
    batch = _tokens([8, 5])
    with torch.no_grad():
        _, extra = model(batch, features_only=True)
    record = extra["sparsity"][0]
    pattern = record.learned[1, 0, :5, :5]  # sentence 2, first DAM head, real tokens
    expected = torch.zeros(5, 5)
    expected[0, :] = expected[-1, :] = expected[:, 0] = expected[:, -1] = 1
    assert torch.equal(pattern.float(), expected)


def test_update_count_reaches_the_sparsity_terms():
    """fairseq's set_num_updates reaches the attention modules (RoBERTa has
    no encoder.num_updates): the AAA hinge weight schedule reads it."""
    model = build_roberta("roberta_aaa", TINY).train()
    model.set_num_updates(7)
    terms = model.get_sparsity_terms(model(_tokens([6, 9])))
    assert terms.num_updates == 7
    from fairseq_local.criteria.penalized import SparsityLoss, SparsityLossConfig

    crit = SparsityLoss()
    crit.init_sparsity(SparsityLossConfig(aaa_alpha=10.0, aaa_target=0.9, aaa_alpha_updates=14))
    _, log = crit.penalties(terms, sample_size=1)
    assert log["aaa_alpha_sum"] == 5.0  # 10 x 7/14


# ---------------------------------------------------------------- --segment-embeddings

def test_segment_ids_split_a_pair_after_the_first_eos():
    from fairseq_local.models.roberta import segment_ids

    eos = 2  # <s> a b </s> </s> c </s> <pad=1>
    pair = torch.tensor([[0, 5, 6, 2, 2, 7, 2, 1], [1, 1, 0, 5, 2, 2, 7, 2]])  # right- and left-padded
    assert segment_ids(pair, eos).tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1]]
    assert segment_ids(torch.tensor([[0, 5, 6, 2]]), eos).tolist() == [[0, 0, 0, 0]]


def test_segment_embeddings_add_one_table_and_keep_the_lm_head_tied():
    from fairseq_local.models.roberta import SegmentEmbedding

    small = dict(TINY, encoder_layers=2, encoder_attention_heads=2)
    plain, seg = (build_roberta("roberta_local_base", dict(small, segment_embeddings=on), vocab_size=40)
                  for on in (False, True))
    emb = seg.encoder.sentence_encoder.embed_tokens
    assert isinstance(emb, SegmentEmbedding) and type(plain.encoder.sentence_encoder.embed_tokens) is torch.nn.Embedding
    assert seg.encoder.lm_head.weight is emb.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(seg) - count(plain) == 2 * 48
    tokens = torch.tensor([[0, 5, 6, 2, 2, 7, 2]])
    expect = torch.nn.functional.embedding(tokens, emb.weight) + emb.segments.weight[[0, 0, 0, 0, 1, 1, 1]]
    assert torch.equal(emb(tokens), expect)


def test_segment_embeddings_are_padding_invariant_and_change_the_second_sentence():
    torch.manual_seed(0)
    model = build_roberta("roberta_local_base", dict(TINY, encoder_layers=2, encoder_attention_heads=2,
                                                      segment_embeddings=True), vocab_size=40).eval()
    pair = torch.tensor([[0, 5, 6, 2, 2, 7, 8, 2]])
    feats = lambda t: model(t, features_only=True)[0]  # noqa: E731
    padded = torch.cat([pair, torch.ones(1, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(feats(padded)[:, :8], feats(pair))
    single = torch.tensor([[0, 5, 6, 7, 8, 2]])
    before_pair, before_single = feats(pair).detach(), feats(single).detach()
    with torch.no_grad():  # segment 1 marks the second sentence only
        model.encoder.sentence_encoder.embed_tokens.segments.weight[1] += torch.randn(48)  # (LayerNorm drops a constant)
    assert not torch.allclose(feats(pair), before_pair, atol=1e-3)
    torch.testing.assert_close(feats(single), before_single)


def test_aaa_lr_scale_reaches_the_selector_and_leaves_the_model_unchanged():
    torch.manual_seed(0)
    plain = build_roberta("roberta_aaa", dict(TINY, encoder_embed_dim=768, encoder_ffn_embed_dim=64))
    torch.manual_seed(0)
    scaled = build_roberta("roberta_aaa", dict(TINY, encoder_embed_dim=768, encoder_ffn_embed_dim=64,
                                               aaa_lr_scale=30.0))
    sels = [m for m in scaled.modules() if isinstance(m, AxisSelector)]
    assert sels and all(s.lr_scale == 30.0 for s in sels)
    assert all(s.lr_scale == 1.0 for s in plain.modules() if isinstance(s, AxisSelector))
    # the same effective weights (Xavier-uniform, as without the scale), so the same model
    a, b = plain.state_dict(), scaled.state_dict()
    assert list(a) == list(b)
    for key, value in a.items():
        if torch.is_tensor(value):
            assert torch.allclose(value, b[key], atol=1e-6), key
