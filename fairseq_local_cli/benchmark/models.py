"""The train and generate levels of ``fairseq-local benchmark``: training
words/s (NMT and masked LM) and beam-search sentences/s of stock fairseq
models and the plugin's archs, on the same batches, as ratios to stock."""

import argparse
import math
import random
import time
from typing import Callable, Dict, List, Tuple

import torch

from fairseq_local.models.presets import PRESETS
from .timing import Progress, Skipped, fmt, fmt_rate, guarded, markdown_table, median, ratio, round_robin, settings_line

# The NMT model sizes (tiny, demo, base), written once in fairseq_local/models/presets.json.
SIZES: Dict[str, dict] = {name: dict(preset.options) for name, preset in PRESETS.items()}
SIZE_TEXT = {name: preset.text for name, preset in PRESETS.items()}
NMT_ARCHS = ("a", "f", "i", "l")
LEARNED_ARCHS = ("dam_s", "dam_u", "aaa", "head_gates")
ROBERTA_ARCHS = ("roberta_band6", "roberta_band6_120_tied")
GEN_ARCHS = ("f", "l")
# The demo's sparsity-criterion weights (scripts/lib.sh); they act on learned heads only.
SPARSITY = dict(dam_lambda=1e-4, aaa_target=0.5, aaa_alpha=0.05, gate_lambda=0.1)


def _settings(args: argparse.Namespace, level: str, what: str) -> str:
    return settings_line(level, what, args.repeats, args.warmup, args.seed)


def _pair_batch(lengths: List[int], vocab: int, rng: random.Random) -> Dict:
    """One batch of random sentence pairs of these lengths (the target is the
    source reversed): left-padded source, right-padded target."""
    B, T = len(lengths), max(lengths)
    src, tgt, prev = (torch.ones(B, T, dtype=torch.long) for _ in range(3))
    for b, n_tok in enumerate(lengths):
        words = [rng.randrange(4, vocab) for _ in range(n_tok - 1)] + [2]
        src[b, T - n_tok:] = torch.tensor(words)
        tgt[b, :n_tok] = torch.tensor(words[::-1][1:] + [2])
        prev[b, :n_tok] = torch.tensor([2] + words[::-1][1:])
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor(lengths), "prev_output_tokens": prev},
            "target": tgt, "ntokens": sum(lengths), "nsentences": B}


def _nmt_batches(n: int, vocab: int, max_tokens: int, seed: int) -> List[Dict]:
    """``n`` batches of sentences of 10-40 tokens, up to ``max_tokens`` tokens each."""
    rng = random.Random(seed)
    batches = []
    for _ in range(n):
        lengths: List[int] = []
        while sum(lengths) + 40 <= max_tokens or not lengths:
            lengths.append(rng.randint(10, 40))
        batches.append(_pair_batch(lengths, vocab, rng))
    return batches


def _mlm_batches(n: int, dictionary, length: int, sentences: int, seed: int) -> List[Dict]:
    """Full-length masked-LM batches: 15 % of the inner tokens masked."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        src = torch.randint(dictionary.nspecial, len(dictionary) - 1, (sentences, length), generator=g)
        src[:, 0], src[:, -1] = dictionary.bos(), dictionary.eos()
        chosen = torch.rand(sentences, length, generator=g) < 0.15
        chosen[:, 0] = chosen[:, -1] = False
        chosen[0, 1] = True
        target = torch.where(chosen, src, torch.full_like(src, dictionary.pad()))
        src = src.masked_fill(chosen, dictionary.index("<mask>"))
        batches.append({"net_input": {"src_tokens": src, "src_lengths": torch.full((sentences,), length)},
                        "target": target, "ntokens": sentences * length, "nsentences": sentences})
    return batches


def _label(key: str) -> Tuple[str, str]:
    """(paper label, arch) of a config key; "stock" for fairseq's own archs."""
    from fairseq_local.models.archs import get_config

    if key in ("transformer", "roberta_base"):
        return "stock", key
    cfg = get_config(key)
    return (f"({cfg.letter})" if cfg.letter else cfg.name), cfg.arch


def _nmt_model(arch: str, size: str, args, task):
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    ns = argparse.Namespace(**SIZES[size], dropout=0.1, share_all_embeddings=True)
    if arch != "transformer":
        ns.attn_impl, ns.dam_max_len = args.attn_impl, 128
        if args.mask_mode:
            ns.mask_mode = args.mask_mode
    ARCH_CONFIG_REGISTRY[arch](ns)
    torch.manual_seed(args.seed + 1)
    return ARCH_MODEL_REGISTRY[arch].build_model(ns, task)  # the plugin's archs with --attn-impl


def _roberta_model(arch: str, args, dictionary):
    from fairseq_local.models.archs import get_config
    from fairseq_local.models.roberta import build_roberta
    from fairseq_local.attention.layout import format_layout, parse_layout

    overrides: Dict[str, object] = {"encoder_layers": args.roberta_layers}
    if arch != "roberta_base":
        overrides["attn_impl"] = args.attn_impl
        overrides["attn_layout"] = format_layout(parse_layout(get_config(arch).layout)[:args.roberta_layers])
    torch.manual_seed(args.seed + 1)
    return build_roberta(arch, overrides, dictionary=dictionary)  # the plugin's archs with --attn-impl


def _criteria(args, nmt_task, mlm_task):
    """(label-smoothed NMT criterion, masked-LM criterion) as fairseq-train builds them."""
    from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
    from fairseq.criterions.masked_lm import MaskedLmConfig, MaskedLmLoss

    from fairseq_local.criteria.label_smoothed import (LabelSmoothedCrossEntropyWithSparsity,
                                           LabelSmoothedCrossEntropyWithSparsityConfig)
    from fairseq_local.criteria.masked_lm import MaskedLmWithSparsity, MaskedLmWithSparsityConfig

    if args.plain_criterion:
        return (LabelSmoothedCrossEntropyCriterion(nmt_task, sentence_avg=False, label_smoothing=0.1),
                MaskedLmLoss(MaskedLmConfig(tpu=False), mlm_task))
    cfg = LabelSmoothedCrossEntropyWithSparsityConfig(label_smoothing=0.1, sentence_avg=False, **SPARSITY)
    return (LabelSmoothedCrossEntropyWithSparsity(cfg, nmt_task),
            MaskedLmWithSparsity(MaskedLmWithSparsityConfig(tpu=False, **SPARSITY), mlm_task))


def _train_group(models: Dict[str, torch.nn.Module], batches: List[Dict], criterion, args,
                 after_round: Callable[[int], None]) -> Dict[str, object]:
    """Median words/s of each model over ``batches`` (one update each)."""
    words = sum(b["ntokens"] for b in batches)

    def candidate(model):
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        updates = [0]

        def run() -> float:
            start = time.perf_counter()
            for batch in batches:
                model.set_num_updates(updates[0])
                opt.zero_grad(set_to_none=True)
                loss, _, _ = criterion(model, batch)
                loss.backward()
                opt.step()
                updates[0] += 1
            return words / (time.perf_counter() - start)
        return guarded(run)

    samples = round_robin({k: candidate(m) for k, m in models.items()}, args.repeats, args.warmup, args.seed,
                          after_round)
    return {k: (v if isinstance(v, Skipped) else median(v)) for k, v in samples.items()}


def _ratio_rows(group: str, results: Dict[str, object], stock: str, skipped: List[str]) -> List[List[str]]:
    rows = []
    base = results[stock] if not isinstance(results[stock], Skipped) else None
    for key, value in results.items():
        label, arch = _label(key)
        if isinstance(value, Skipped):
            skipped.append(f"{arch} ({group}): {value}")
            value = None
        rows.append(([group] if group else []) + [label, arch, fmt_rate(value), fmt(ratio(value, base), ".3f")])
    return rows


def train(args: argparse.Namespace) -> str:
    """The training level's text."""
    from fairseq.tasks.translation import TranslationTask

    from fairseq_local.models.transformer import dummy_dictionary

    d = dummy_dictionary(args.vocab)
    nmt_task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    mlm_dict = dummy_dictionary(args.vocab)
    mlm_dict.add_symbol("<mask>")
    mlm_task = argparse.Namespace(source_dictionary=mlm_dict, target_dictionary=mlm_dict, dictionary=mlm_dict)
    nmt_crit, mlm_crit = _criteria(args, nmt_task, mlm_task)
    groups = [("nmt", s) for s in args.nmt_sizes] + [("roberta", n) for n in args.roberta_lengths]
    progress = Progress("train", len(groups), not args.quiet)
    rows: List[List[str]] = []
    notes, skipped = [], []
    for kind, value in groups:
        if kind == "nmt":
            keys = ["transformer"] + [_label(k)[1] for k in args.archs]
            if value in args.learned_sizes:
                keys += [_label(k)[1] for k in args.learned_archs]
            keys = list(dict.fromkeys(keys))
            models = {k: _nmt_model(k, value, args, nmt_task) for k in keys}
            batches, crit, group = _nmt_batches(args.steps, args.vocab, args.max_tokens, args.seed), nmt_crit, \
                f"NMT {value}"
            notes.append(f"{group}: {SIZE_TEXT[value]}, 6 encoder layers of 8 heads, batches of "
                         f"~{sum(b['ntokens'] for b in batches) // len(batches):,} target tokens")
        else:
            keys = list(dict.fromkeys(["roberta_base"] + list(args.roberta_archs)))
            models = {k: _roberta_model(k, args, mlm_dict) for k in keys}
            sentences = max(1, args.roberta_tokens // value)
            batches, crit, group = _mlm_batches(args.steps, mlm_dict, value, sentences, args.seed), mlm_crit, \
                f"RoBERTa n={value}"
            layers, each = args.roberta_layers, "sentence" if sentences == 1 else "sentences"
            notes.append(f"{group}: d=768, {layers} layer{'s' if layers > 1 else ''} of 12 heads, {sentences} "
                         f"{each} of {value} tokens a batch, masked LM")
        results = _train_group(models, batches, crit, args,
                               lambda r: progress.note(f"{group}: round {r}/{args.repeats}"))
        rows += _ratio_rows(group, results, keys[0], skipped)
        del models
        progress.step(f"{group} done")
    crit_text = "fairseq's criteria" if args.plain_criterion else "the _with_sparsity criteria (demo weights)"
    updates = f"{args.steps} update{'s' if args.steps > 1 else ''} a round"
    lines = [_settings(args, "train", f"training words/s (forward, loss, backward, Adam step), {updates}, "
                                      f"{crit_text}, attention path {args.attn_impl}, vocabulary {args.vocab}"),
             "", markdown_table(["group", "config", "arch", "words/s", "ratio to stock"], rows,
                                [False, False, False, True, True]), ""]
    lines += [f"- {n}." for n in notes]
    lines.append("- words/s: target tokens (NMT) or all tokens (masked LM) of the round's batches over its "
                 "time; ratio: to the group's stock fairseq model, measured in the same rounds.")
    if skipped:
        lines.append("- '-': not measured: " + "; ".join(skipped) + ".")
    return "\n".join(lines)


def generate(args: argparse.Namespace) -> str:
    """The generation level's text."""
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.tasks.translation import TranslationTask

    from fairseq_local.models.transformer import dummy_dictionary

    d = dummy_dictionary(args.vocab)
    task = TranslationTask(argparse.Namespace(left_pad_source=True), d, d)
    keys = list(dict.fromkeys(["transformer"] + [_label(k)[1] for k in args.gen_archs]))
    progress = Progress("generate", 1, not args.quiet)
    group = f"NMT {args.gen_size}"
    rng, batches = random.Random(args.seed), []
    for b in range(math.ceil(args.gen_sentences / args.gen_batch)):
        size = min(args.gen_batch, args.gen_sentences - b * args.gen_batch)
        net_input = _pair_batch([rng.randint(10, 40) for _ in range(size)], args.vocab, rng)["net_input"]
        del net_input["prev_output_tokens"]
        batches.append({"net_input": net_input})

    def candidate(key: str):
        model = _nmt_model(key, args.gen_size, args, task).eval()
        gen = SequenceGenerator([model], d, beam_size=args.beam, max_len_a=0, max_len_b=args.gen_len,
                                min_len=args.gen_len, len_penalty=0.6)

        def run() -> float:
            start = time.perf_counter()
            for batch in batches:
                gen.generate([model], batch)
            return args.gen_sentences / (time.perf_counter() - start)
        return guarded(run)

    samples = round_robin({k: candidate(k) for k in keys}, args.repeats, args.warmup, args.seed,
                          lambda r: progress.note(f"{group}: round {r}/{args.repeats}"))
    results = {k: (v if isinstance(v, Skipped) else median(v)) for k, v in samples.items()}
    progress.step(f"{group} done")
    skipped: List[str] = []
    rows = _ratio_rows("", results, "transformer", skipped)
    lines = [_settings(args, "generate", f"beam search sentences/s (SequenceGenerator, beam {args.beam}, "
                                         f"lenpen 0.6), NMT {args.gen_size} ({SIZE_TEXT[args.gen_size]}), "
                                         f"{args.gen_sentences} sentences of 10-40 tokens a round in batches "
                                         f"of {args.gen_batch}, attention path {args.attn_impl}"),
             "", markdown_table(["config", "arch", "sentences/s", "ratio to stock"], rows,
                                [False, False, True, True]), "",
             f"- untrained models: every hypothesis is held to {args.gen_len} tokens (min and max length), so "
             "all models run the same decoder steps; ratio: to stock transformer, measured in the same rounds."]
    if skipped:
        lines.append("- '-': not measured: " + "; ".join(skipped) + ".")
    return "\n".join(lines)
