"""``fairseq-local convert-roberta``: a stock fairseq RoBERTa checkpoint (separate
q/k/v or fused in_proj) as a roberta_local arch.  Equal outputs with an
all-global layout, Q/K tying by first member or mean, classification heads
kept, strict loading with one-line errors; end to end on checkpoints written
by fairseq-train, loaded by from_pretrained and fine-tuned with
--finetune-from-model."""

import argparse
import copy
import random
import sys

import pytest
import torch

from helpers import USER_DIR, run
from fairseq_local_cli.convert_roberta import main
from fairseq_local.models.convert import convert_state, normalise_stock_state
from fairseq_local.models.roberta import build_roberta

VOCAB = 40
TINY = dict(encoder_layers=2, encoder_attention_heads=4, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
            max_positions=64)
BERT12 = dict(encoder_layers=12, encoder_attention_heads=12, encoder_embed_dim=48, encoder_ffn_embed_dim=96,
              max_positions=64)


def stock_model(dims=TINY, head=None, seed=0):
    """fairseq's roberta_base with ``dims`` and every parameter redrawn (so
    biases and LayerNorms are tested too); ``head``: (name, classes) of a
    classification head.  Eval mode."""
    model = build_roberta("roberta_base", dict(dims), vocab_size=VOCAB)
    if head:
        model.register_classification_head(head[0], num_classes=head[1])
    torch.manual_seed(seed)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return model.eval()


def fused(state_dict):
    """The state dict in the legacy format: q, k, v stacked in ``in_proj_*``."""
    out = {}
    for key, value in state_dict.items():
        if ".self_attn.q_proj." in key:
            p = key.rsplit(".", 1)[1]
            stem = key.split(".q_proj.")[0]
            out[f"{stem}.in_proj_{p}"] = torch.cat([state_dict[f"{stem}.{n}_proj.{p}"] for n in "qkv"])
        elif not any(f".self_attn.{n}_proj." in key for n in "kv"):
            out[key] = value
    return out


def save_stock(model, path, state_dict=None):
    """A checkpoint as fairseq-train writes it (model options in cfg.model)."""
    args = copy.deepcopy(model.args)
    args.arch = args._name = "roberta_base"
    torch.save({"cfg": {"model": args, "task": {"_name": "masked_lm"}},
                "model": state_dict if state_dict is not None else model.state_dict(),
                "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "FairseqAdam",
                                       "lr_scheduler_state": {}, "num_updates": 2}],
                "extra_state": {"train_iterator": {"epoch": 1}}}, path)


def load_converted(path):
    """The converted checkpoint's model, built from its own options and loaded
    strictly, as fairseq loads it (classification heads from the checkpoint)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    args = vars(copy.deepcopy(ckpt["cfg"]["model"]))
    args["load_checkpoint_heads"] = True
    model = build_roberta(args["arch"], args, vocab_size=VOCAB)
    model.load_state_dict(ckpt["model"], strict=True, model_cfg=argparse.Namespace(**args))
    return model.eval(), ckpt


def padded_batch(lengths=(9, 5, 7), vocab=VOCAB, seed=1):
    """(B, T) tokens: <s> w... </s>, padded on the right as RoBERTa pads."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.full((len(lengths), max(lengths)), 1, dtype=torch.long)
    for b, n in enumerate(lengths):
        tokens[b, :n] = torch.randint(4, vocab, (n,), generator=g)
        tokens[b, 0], tokens[b, n - 1] = 0, 2
    return tokens


def assert_same_outputs(stock, ours, tokens, head=None):
    with torch.no_grad():
        f_stock, _ = stock(tokens, features_only=True)
        f_ours, _ = ours(tokens, features_only=True)
        l_stock, _ = stock(tokens)
        l_ours, _ = ours(tokens)
    real = tokens.ne(1)
    assert (f_stock - f_ours)[real].abs().max() < 1e-5
    assert (l_stock - l_ours)[real].abs().max() < 1e-5
    if head:
        with torch.no_grad():
            c_stock, _ = stock(tokens, features_only=True, classification_head_name=head)
            c_ours, _ = ours(tokens, features_only=True, classification_head_name=head)
        assert (c_stock - c_ours).abs().max() < 1e-5


def one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


# ---------------------------------------------------------------- the mapping


@pytest.mark.parametrize("legacy", [False, True], ids=["qkv", "in_proj"])
def test_all_global_conversion_computes_the_stock_model(tmp_path, legacy, capsys):
    stock = stock_model()
    state = fused(stock.state_dict()) if legacy else None
    if legacy:
        assert "encoder.sentence_encoder.layers.1.self_attn.in_proj_weight" in state
    save_stock(stock, tmp_path / "stock.pt", state)
    assert main([str(tmp_path / "stock.pt"), str(tmp_path / "out.pt"), "--arch", "roberta_local_base"]) == 0
    assert "8 Q/K group(s)" in capsys.readouterr().out
    ours, ckpt = load_converted(tmp_path / "out.pt")
    assert type(ours).__name__ == "LocalRobertaModel"
    assert ckpt["cfg"]["model"].arch == ckpt["cfg"]["model"]._name == "roberta_local_base"
    assert ckpt["cfg"]["model"].attn_layout == "[global*4]*2"
    assert ckpt["cfg"]["task"] == {"_name": "masked_lm"}
    assert ckpt["last_optimizer_state"] is None and ckpt["optimizer_history"][-1]["num_updates"] == 0
    assert_same_outputs(stock, ours, padded_batch())
    # Wv, Wo, FFN, embeddings, LM head: copied exactly
    for key, value in stock.state_dict().items():
        if ".q_proj." not in key and ".k_proj." not in key:
            assert torch.equal(ckpt["model"][key], value), key


def test_in_proj_is_split_as_fairseq_splits_it():
    stock = stock_model().state_dict()
    assert normalise_stock_state(fused(stock)).keys() == stock.keys()
    for key, value in normalise_stock_state(fused(stock)).items():
        assert torch.equal(value, stock[key]), key
    old = {k.replace("encoder.", "decoder.", 1).replace(".layernorm_embedding.", ".emb_layer_norm."): v
           for k, v in stock.items()}
    assert normalise_stock_state(old).keys() == stock.keys()


def member_slices(stock_state, name, members, head_dim=4):
    """The rows of the stock ``name`` ({q,k}_proj.{weight,bias}) of each (layer, head)."""
    return [stock_state[f"encoder.sentence_encoder.layers.{l}.self_attn.{name}"][h * head_dim:(h + 1) * head_dim]
            for l, h in members]


ALL = [(l, h) for l in range(12) for h in range(12)]


@pytest.mark.parametrize("arch,tie_init", [("roberta_band6_all_tied", "first"), ("roberta_band6_all_tied", "mean"),
                                           ("roberta_band6_132_tied", "mean"), ("roberta_band6_120_tied", "first")])
def test_tied_groups_start_from_the_first_member_or_the_mean(arch, tie_init):
    stock = stock_model(BERT12).state_dict()
    model = build_roberta(arch, dict(BERT12), vocab_size=VOCAB)
    new = convert_state(stock, model, tie_init)
    model.load_state_dict(new, strict=True)
    untied_layers = {"roberta_band6_all_tied": 0, "roberta_band6_132_tied": 1, "roberta_band6_120_tied": 2}[arch]
    tied = [(l, h) for l, h in ALL if l < 12 - untied_layers]
    prefix = "encoder.sentence_encoder.layers"
    for name in ("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias"):
        slices = member_slices(stock, name, tied)
        expected = slices[0] if tie_init == "first" else torch.stack(slices).mean(0)
        assert not torch.equal(slices[0], slices[1])
        for l in range(12 - untied_layers):  # the one shared group, under every layer that uses it
            assert torch.equal(new[f"{prefix}.{l}.self_attn.qk.0.{name}"], expected)
            assert model.encoder.sentence_encoder.layers[l].self_attn.qk[0] is \
                model.encoder.sentence_encoder.layers[0].self_attn.qk[0]
        for l in range(12 - untied_layers, 12):  # untied layers: each head its own slice
            for h in range(12):
                (own,) = member_slices(stock, name, [(l, h)])
                assert torch.equal(new[f"{prefix}.{l}.self_attn.qk.{h}.{name}"], own)
    for key in ("v_proj.weight", "out_proj.bias"):
        assert torch.equal(new[f"{prefix}.5.self_attn.{key}"], stock[f"{prefix}.5.self_attn.{key}"])


def test_layer_local_groups_and_learned_extras(tmp_path):
    """'@a' ties within one layer; AAA/gate parameters keep their fresh values."""
    stock = stock_model().state_dict()
    layout = "[aaa@a,aaa@a,global:gate@b,global@b]*2"
    model = build_roberta("roberta_local_base", dict(TINY, attn_layout=layout), vocab_size=VOCAB)
    fresh = {k: v.clone() for k, v in model.state_dict().items() if ".learned.aaa." in k or ".gates." in k}
    assert fresh and any(".gates.log_alpha" in k for k in fresh)
    new = convert_state(stock, model, "mean")
    for key, value in fresh.items():
        assert torch.equal(new[key], value), key
    for l in range(2):
        for g, heads in enumerate([(0, 1), (2, 3)]):
            for name in ("q_proj.weight", "k_proj.bias"):
                expected = torch.stack(member_slices(stock, name, [(l, h) for h in heads], head_dim=8)).mean(0)
                assert torch.equal(new[f"encoder.sentence_encoder.layers.{l}.self_attn.qk.{g}.{name}"], expected)


def test_the_fresh_learned_tensors_repeat_with_the_seed(tmp_path):
    save_stock(stock_model(), tmp_path / "stock.pt")
    files = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        torch.manual_seed(int(name.encode()[0]))  # the caller's generator state does not matter
        assert main([str(tmp_path / "stock.pt"), str(tmp_path / f"{name}.pt"), "--arch", "roberta_dam_s",
                     "--attn-layout", "[dam-s*4]*2", "--seed", seed]) == 0
        model = load_converted(tmp_path / f"{name}.pt")[1]["model"]
        files[name] = {k: v for k, v in model.items() if ".learned.dam." in k}
    assert files["a"] and all(torch.equal(files["a"][k], files["b"][k]) for k in files["a"])
    assert not all(torch.equal(files["a"][k], files["c"][k]) for k in files["a"])
    state = torch.random.get_rng_state()
    main([str(tmp_path / "stock.pt"), str(tmp_path / "d.pt"), "--arch", "roberta_dam_s", "--attn-layout", "[dam-s*4]*2"])
    assert torch.equal(torch.random.get_rng_state(), state)  # left as it was


def test_classification_heads_are_kept(tmp_path):
    stock = stock_model(head=("sst2", 3))
    save_stock(stock, tmp_path / "stock.pt")
    assert main([str(tmp_path / "stock.pt"), str(tmp_path / "out.pt"), "--arch", "roberta_local_base"]) == 0
    ours, ckpt = load_converted(tmp_path / "out.pt")
    assert list(ours.classification_heads) == ["sst2"]
    for key in [k for k in stock.state_dict() if k.startswith("classification_heads.")]:
        assert torch.equal(ckpt["model"][key], stock.state_dict()[key])
    assert_same_outputs(stock, ours, padded_batch(), head="sst2")


# ---------------------------------------------------------------- bad input


@pytest.fixture
def stock_file(tmp_path):
    stock = stock_model()
    save_stock(stock, tmp_path / "stock.pt")
    return stock, tmp_path / "stock.pt"


def test_missing_and_wrong_checkpoints_are_one_line_errors(tmp_path, stock_file, capsys):
    stock, path = stock_file
    out = str(tmp_path / "out.pt")
    assert "no checkpoint" in one_line_error(capsys, [str(tmp_path / "nope.pt"), out, "--arch", "roberta_local_base"])
    # an NMT checkpoint
    nmt = tmp_path / "nmt.pt"
    torch.save({"cfg": {"model": argparse.Namespace(arch="transformer", _name="transformer")},
                "model": {"encoder.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4)}}, nmt)
    err = one_line_error(capsys, [str(nmt), out, "--arch", "roberta_local_base"])
    assert "not a stock RoBERTa checkpoint (arch 'transformer')" in err
    # one already converted
    assert main([str(path), str(tmp_path / "conv.pt"), "--arch", "roberta_local_base"]) == 0
    err = one_line_error(capsys, [str(tmp_path / "conv.pt"), out, "--arch", "roberta_local_base"])
    assert "already a roberta_local checkpoint" in err
    # not a checkpoint at all
    (tmp_path / "junk.pt").write_text("not a checkpoint\n")
    assert f"'{tmp_path / 'junk.pt'}' is not a fairseq checkpoint (truncated, or not a torch file" in one_line_error(
        capsys, [str(tmp_path / "junk.pt"), out, "--arch", "roberta_local_base"])
    one_line_error(capsys, [str(path), out, "--arch", "transformer_local_baseline"])
    one_line_error(capsys, [str(path), out, "--arch", "roberta_local_base", "--tie-init", "median"])
    one_line_error(capsys, [str(path), str(tmp_path / "no" / "out.pt"), "--arch", "roberta_local_base"])


@pytest.mark.parametrize("options,message", [
    (["--arch", "roberta_band6"], "does not fit the checkpoint's 2 layers x 4 heads"),
    (["--arch", "roberta_local_base", "--attn-layout", "[global*4]*3"], "has 3 layers but the encoder has 2"),
    (["--arch", "roberta_local_base", "--attn-layout", "[global*6]*2"], "layer 1 has 6 heads"),
    (["--arch", "roberta_local_base", "--attn-layout", "[band-x*4]*2"], "band-x"),
])
def test_a_layout_that_does_not_fit_is_a_one_line_error(tmp_path, stock_file, capsys, options, message):
    err = one_line_error(capsys, [str(stock_file[1]), str(tmp_path / "out.pt"), *options])
    assert message in err
    assert not (tmp_path / "out.pt").exists()


@pytest.mark.parametrize("corrupt,message", [
    ("drop", "missing key"), ("drop_q", "missing key"), ("add", "unexpected key"), ("shape", "has shape (64, 16)"),
    ("shape_k", "has shape (32, 16)"),
])
def test_a_corrupted_state_dict_is_a_one_line_error(tmp_path, stock_file, capsys, corrupt, message):
    stock, _ = stock_file
    state = dict(stock.state_dict())
    if corrupt == "drop":
        del state["encoder.sentence_encoder.layers.1.fc1.weight"]
    elif corrupt == "drop_q":
        del state["encoder.sentence_encoder.layers.0.self_attn.q_proj.bias"]
    elif corrupt == "add":
        state["encoder.sentence_encoder.layers.2.fc1.weight"] = torch.zeros(64, 32)
    elif corrupt == "shape":
        state["encoder.sentence_encoder.layers.1.fc1.weight"] = torch.zeros(64, 16)
    else:
        state["encoder.sentence_encoder.layers.1.self_attn.k_proj.weight"] = torch.zeros(32, 16)
    save_stock(stock, tmp_path / "bad.pt", state)
    err = one_line_error(capsys, [str(tmp_path / "bad.pt"), str(tmp_path / "out.pt"), "--arch", "roberta_local_base"])
    assert message in err
    assert not (tmp_path / "out.pt").exists()


# ---------------------------------------------------------------- end to end


def write_corpus(raw, n_train=160, n_valid=16, seed=0):
    """Sentences of 4-14 words and a label per sentence (its first word's parity)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    for split, n in [("train", n_train), ("valid", n_valid)]:
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 14))) for _ in range(n)]
        (raw / f"{split}.txt").write_text("\n".join(lines) + "\n")
        (raw / f"{split}.label").write_text("\n".join(str(int(l.split()[0][1:]) % 2) for l in lines) + "\n")


MODEL = ["--encoder-layers", "2", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
         "--encoder-attention-heads", "4", "--max-positions", "64"]
TRAIN = ["--cpu", "--num-workers", "0", "--batch-size", "8", "--required-batch-size-multiple", "1",
         "--optimizer", "adam", "--max-update", "2", "--no-epoch-checkpoints", "--log-interval", "1",
         "--seed", "1", "--no-progress-bar", "--disable-validation"]


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory):
    """A tiny corpus binarised for masked_lm and sentence_prediction, and a
    stock roberta_base pretrained on it by fairseq-train for two updates."""
    root = tmp_path_factory.mktemp("convert")
    raw = root / "raw"
    raw.mkdir()
    write_corpus(raw)
    pairs = f"--trainpref {raw}/train.txt --validpref {raw}/valid.txt"
    calls = [f"{pairs} --destdir {root}/mlm",
             f"{pairs} --srcdict {root}/mlm/dict.txt --destdir {root}/cls/input0",
             f"--trainpref {raw}/train.label --validpref {raw}/valid.label --destdir {root}/cls/label"]
    # fairseq-preprocess three times, in one interpreter
    run([sys.executable, "-c", "import sys\nfrom fairseq import options\nfrom fairseq_cli.preprocess import main\n"
         "for a in sys.argv[1:]:\n    main(options.get_preprocessing_parser().parse_args("
         "['--only-source', '--workers', '1', *a.split()]))", *calls])
    run(["fairseq-train", str(root / "mlm"), "--task", "masked_lm", "--arch", "roberta_base", *MODEL,
         "--tokens-per-sample", "64", "--sample-break-mode", "complete", "--lr", "1e-3",
         "--save-dir", str(root / "stock"), *TRAIN])
    return root


def finetune(root, save, arch_args, init, *extra):
    return run(["fairseq-train", str(root / "cls"), "--user-dir", USER_DIR,
                "--task", "sentence_prediction", *arch_args, *MODEL, "--num-classes", "2",
                "--init-token", "0", "--separator-token", "2", "--criterion", "sentence_prediction",
                "--finetune-from-model", str(init), "--save-dir", str(save), *TRAIN, *extra])


def hub_model(path, data, **kwargs):
    from fairseq.models.roberta import RobertaModel

    hub = RobertaModel.from_pretrained(str(path.parent), checkpoint_file=path.name, data_name_or_path=str(data),
                                       bpe=None, **kwargs)
    return hub.model.eval()


def convert(*argv):
    return run(["fairseq-local", "convert-roberta", *map(str, argv)])


@pytest.mark.slow
def test_fairseq_train_checkpoint_converts_and_loads_with_from_pretrained(stock_run, tmp_path):
    stock_path = stock_run / "stock" / "checkpoint_last.pt"
    out = tmp_path / "converted.pt"
    r = convert(stock_path, out, "--arch", "roberta_local_base")
    assert "roberta_local_base, 2 layers x 4 heads" in r.stdout
    stock = hub_model(stock_path, stock_run / "mlm", user_dir=USER_DIR)  # (loads on torch >= 2.6)
    ours = hub_model(out, stock_run / "mlm", user_dir=USER_DIR)
    assert type(ours).__name__ == "LocalRobertaModel"
    assert_same_outputs(stock, ours, padded_batch(vocab=30))


@pytest.mark.slow
def test_converted_checkpoint_fine_tunes_with_finetune_from_model(stock_run, tmp_path, capsys):
    """A converted model (Q/K tied across layers, AAA heads) fine-tunes with
    fairseq-train --finetune-from-model, starting from the converted weights;
    a stock fine-tuned model's classification head survives conversion."""
    layout = "[aaa@@t*2,band-1@@t*2]*2"
    out = tmp_path / "converted.pt"
    assert main([str(stock_run / "stock" / "checkpoint_last.pt"), str(out), "--arch", "roberta_local_base",
                 "--attn-layout", layout, "--tie-init", "mean"]) == 0
    assert "1 Q/K group(s) (--tie-init mean)" in capsys.readouterr().out
    arch = ["--arch", "roberta_local_base", "--attn-layout", layout]
    r = finetune(stock_run, tmp_path / "ft", arch, out, "--lr", "1e-12")
    assert f"Loaded checkpoint {out}" in r.stdout + r.stderr
    converted = torch.load(out, map_location="cpu", weights_only=False)["model"]
    tuned = torch.load(tmp_path / "ft" / "checkpoint_last.pt", map_location="cpu", weights_only=False)["model"]
    for key in ("encoder.sentence_encoder.layers.1.self_attn.qk.0.q_proj.weight",
                "encoder.sentence_encoder.embed_tokens.weight", "encoder.sentence_encoder.layers.0.fc1.bias"):
        assert torch.allclose(tuned[key], converted[key], atol=1e-6), key
    assert "classification_heads.sentence_classification_head.out_proj.weight" in tuned

    # stock fine-tuned checkpoint -> converted: the head is kept and predicts the same
    finetune(stock_run, tmp_path / "stock_ft", ["--arch", "roberta_base"], stock_run / "stock" / "checkpoint_last.pt",
             "--lr", "1e-3")
    stock_path, conv_path = tmp_path / "stock_ft" / "checkpoint_last.pt", tmp_path / "conv_ft.pt"
    assert main([str(stock_path), str(conv_path), "--arch", "roberta_local_base"]) == 0
    assert "classification heads: sentence_classification_head" in capsys.readouterr().out
    stock = hub_model(stock_path, stock_run / "cls", user_dir=USER_DIR)
    ours = hub_model(conv_path, stock_run / "cls", user_dir=USER_DIR)
    assert_same_outputs(stock, ours, padded_batch(vocab=30), head="sentence_classification_head")
    # and the command's errors are one line from a fresh interpreter too
    r = run(["fairseq-local", "convert-roberta", str(conv_path), str(tmp_path / "x.pt"), "--arch",
             "roberta_local_base"], check=False)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
