"""``fairseq-local configs --arch/--roberta/--preset``: what the scripts read
instead of Python of their own, and the model-size presets written once
(``fairseq_local/models/presets.json``) for the benchmark, the tests and the
demo scripts."""

import pytest

from fairseq_local_cli.benchmark.models import SIZE_TEXT, SIZES
from fairseq_local.models.presets import PRESETS
from helpers import TINY, run
from helpers.probes import one_line_error, run_command

# The dimensions as the benchmark, the tests and scripts/lib.sh wrote them out.
TINY_FLAGS = ["--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-embed-dim", "32",
              "--decoder-ffn-embed-dim", "64", "--decoder-layers", "1", "--decoder-attention-heads", "2"]
DEMO_FLAGS = ["--encoder-embed-dim", "128", "--encoder-ffn-embed-dim", "256", "--decoder-embed-dim", "128",
              "--decoder-ffn-embed-dim", "256", "--decoder-layers", "2"]


def test_presets_are_the_sizes_of_the_benchmark_the_tests_and_the_demo(capsys):
    assert list(PRESETS) == ["tiny", "demo", "base"]
    assert PRESETS["tiny"].flags() == TINY_FLAGS and PRESETS["demo"].flags() == DEMO_FLAGS
    assert SIZES == {"tiny": dict(encoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_embed_dim=32,
                                  decoder_ffn_embed_dim=64, decoder_layers=1, decoder_attention_heads=2),
                     "demo": dict(encoder_embed_dim=128, encoder_ffn_embed_dim=256, decoder_embed_dim=128,
                                  decoder_ffn_embed_dim=256, decoder_layers=2),
                     "base": {}}
    assert SIZE_TEXT == {"tiny": "d=32, FFN 64, 1 decoder layer", "demo": "d=128, FFN 256, 2 decoder layers",
                         "base": "Transformer-base: d=512, FFN 2048, 6 decoder layers"}
    assert TINY[:len(TINY_FLAGS)] == TINY_FLAGS
    for name, flags in [("demo", DEMO_FLAGS), ("tiny", TINY_FLAGS), ("base", [])]:
        assert run_command(capsys, ["configs", "--preset", name])[:2] == (0, " ".join(flags) + "\n")


@pytest.mark.slow
def test_the_demo_recipe_reads_the_demo_preset():
    r = run(["bash", "-c", 'source scripts/lib.sh; MAX_UPDATE=7; demo_recipe; printf "%s\\n" "${MODEL[@]}"'])
    assert r.stdout.splitlines() == [*DEMO_FLAGS, "--encoder-normalize-before", "--decoder-normalize-before"]


def test_arch_resolves_keys_as_train_sh_does(capsys):
    status, out, _ = run_command(capsys, ["configs", "--arch", "f", "dam_s", "transformer", "roberta_band6"])
    assert status == 0
    assert out.splitlines() == ["transformer_local_8lochead_all6", "transformer_dam_s", "transformer", "roberta_band6"]
    status, _, err = run_command(capsys, ["configs", "--arch", "f", "zz"])
    assert status == 1
    one_line_error(err, "no configuration 'zz' (letters a-l or a named arch)")


def test_roberta_archs_only(capsys):
    status, out, _ = run_command(capsys, ["configs", "--arch", "roberta_base", "roberta_band6_120_tied", "--roberta"])
    assert status == 0 and out.splitlines() == ["roberta_base", "roberta_band6_120_tied"]
    for key in ("roberta_bnad2", "f", "transformer_local_baseline"):
        status, out, err = run_command(capsys, ["configs", "--arch", "roberta_base", key, "--roberta"])
        assert status == 1 and out == ""
        one_line_error(err, f"'{key}' is not a RoBERTa arch")
    status, _, err = run_command(capsys, ["configs", "--roberta"])
    assert status == 2
    one_line_error(err, "--roberta needs --arch")
