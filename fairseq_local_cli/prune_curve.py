"""``fairseq-local prune-curve``: Voita et al. (2019, §6)'s pruning curve in
one command.

From a trained NMT checkpoint, for each L0 weight λ:

1. fine-tune with a hard-concrete gate on every head of the encoder
   self-attention, decoder self-attention and encoder–decoder attention
   (``scripts/train.sh``, ``--finetune-from-model``: a re-run resumes, a
   finished run is skipped);
2. translate the test set with the closed heads removed (``scripts/generate.sh``:
   in evaluation a closed gate is exactly 0, which removes its head; see
   :mod:`fairseq_local.models.decoder`) and score BLEU;
3. count the open heads per attention type (``fairseq-local gates``) and
   the roles of the remaining encoder heads (``attention dump`` and
   ``analyze roles`` on the gold trees).

Then ``OUT/prune_curve.{md,json}``, ``OUT/prune_curve.png`` (BLEU against
heads kept) and ``OUT/prune_roles.png`` (the remaining heads by role, Fig. 8).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from fairseq_local import outputs
from fairseq_local.outputs import Output
from fairseq_local.analysis.pruning import run_name
from .common import command_parser

DETAILS = """\
Voita et al. 2019 §6: for each --lambdas value, fine-tunes CKPT with a gate
on every head (encoder self-attention, decoder self-attention,
encoder-decoder attention) for --max-update updates, translates the test set with the
closed heads removed, and counts the heads kept and the roles of the
remaining encoder heads. Runs go to OUT/lambda-<value>/; a finished step is
skipped, an interrupted one resumes. Writes OUT/prune_curve.md,
OUT/prune_curve.json, OUT/prune_curve.png and OUT/prune_roles.png.
Options after '--' go to fairseq-train last."""

ROOT = Path(__file__).resolve().parents[1]
GATE_DEFAULTS = ["--gate-preset", "voita"]
# Options that prune-curve sets itself, never copied from the checkpoint.
OWN = {"attn_layout", "decoder_gates", "gate_preset", "gate_init", "gate_beta", "gate_penalty"}


def model_flags(model_cfg: dict) -> List[str]:
    """fairseq-train flags that rebuild the checkpoint's model: every option
    of ``transformer_local`` (and its attention options) with its saved value."""
    from fairseq_local.models.transformer import LocalTransformerModel

    parser = argparse.ArgumentParser(add_help=False)
    LocalTransformerModel.add_args(parser)
    flags: List[str] = []
    for action in parser._actions:
        dest, opts = action.dest, action.option_strings
        if not opts or dest in OWN or dest not in model_cfg or model_cfg[dest] is None:
            continue
        value = model_cfg[dest]
        if isinstance(action, argparse._StoreTrueAction):
            flags += [opts[0]] if value else []
        elif isinstance(action, argparse._StoreFalseAction):
            flags += [opts[0]] if not value else []
        elif not isinstance(value, (dict, list, tuple)):
            flags += [opts[0], str(value)]
    return flags


def gated_layout(layout_text: str) -> str:
    """The layout with a gate on every head (``:gate``), masks and Q/K groups kept."""
    from fairseq_local.attention.layout import LayerSpec, format_layout, parse_layout

    layers = parse_layout(layout_text)
    return format_layout(tuple(LayerSpec(tuple(type(h)(h.mask, h.group, True) for h in layer.heads))
                               for layer in layers))


def _run(cmd: List[str], log: Path, what: str) -> None:
    """Run ``cmd`` from the repository root, its output to ``log``; one
    ``error:`` line (and the log's tail) if it fails."""
    from fairseq_local.errors import InputError

    with open(log, "w") as f:
        r = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        sys.stderr.write("\n".join(tail) + "\n")
        raise InputError(f"{what} failed: see {log}")


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("prune-curve", DETAILS)
    p.add_argument("checkpoint", metavar="CKPT", help="a trained NMT checkpoint (transformer_local archs)")
    p.add_argument("--data", required=True, help="its binarised data folder (with raw/ for the references)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the runs, table and figures")
    p.add_argument("--lambdas", default="0.01,0.05,0.1,0.2,0.5",
                   help="L0 weights, comma-separated (with --gate-preset voita's layer mean; default %(default)s)")
    p.add_argument("--max-update", type=int, default=500, help="fine-tuning updates per λ (default %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3, help="constant fine-tuning learning rate (default %(default)s)")
    p.add_argument("--gates-only", action="store_true",
                   help="fine-tune only the gates, every other weight frozen (fast; Voita et al. fine-tune all)")
    p.add_argument("--ref", help="plain reference text of the test set (default DATA/raw/test.tgt)")
    p.add_argument("--conllu", help="gold trees of test sentences for the roles (default DATA/raw/test.src.conllu)")
    p.add_argument("--max-sentences", type=int, default=500, help="sentences for the roles (default %(default)s)")
    p.add_argument("--rare-top", type=int, default=500, metavar="K",
                   help="rare-word role: sentences whose rarest token is not among the K most frequent "
                        "(Voita et al. §5.3: 500; 0: all)")
    p.add_argument("--beam", default="4", help="beam size (default %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the commands, run nothing")
    outputs.add_force_option(p)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1:]
    p = build_parser()
    args = p.parse_args(argv)
    from fairseq_local.errors import OneLineError

    try:
        return _main(args, extra)
    except (OneLineError, ValueError, OSError) as e:
        p.exit(1, f"error: {str(e).splitlines()[0]}\n")


def _main(args: argparse.Namespace, extra: List[str]) -> int:
    from fairseq_local.checkpoint_compat import local_layout, read_checkpoint
    from fairseq_local.errors import InputError
    from .common import check_output_folder

    try:
        lambdas = [float(x) for x in args.lambdas.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--lambdas must be numbers separated by commas, not {args.lambdas!r}") from None
    if not lambdas or any(lam < 0 for lam in lambdas):
        raise InputError("--lambdas needs at least one value, all >= 0")
    for name, value in (("--max-update", args.max_update), ("--max-sentences", args.max_sentences)):
        if value < 1:
            raise InputError(f"{name} must be >= 1, not {value}")
    if not args.lr > 0:
        raise InputError(f"--lr must be > 0, not {args.lr}")
    if args.rare_top < 0:
        raise InputError(f"--rare-top must be >= 0, not {args.rare_top}")
    if not os.path.isfile(args.checkpoint):
        raise InputError(f"no checkpoint '{args.checkpoint}'")
    # the scripts run from the repository root: every path absolute
    for name in ("checkpoint", "data", "out", "ref", "conllu"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    model_cfg, _ = read_checkpoint(args.checkpoint)
    if not str(model_cfg.get("arch") or model_cfg.get("_name") or "").startswith("transformer"):
        raise InputError(f"'{args.checkpoint}' is not an NMT checkpoint (arch {model_cfg.get('arch')})")
    layout = gated_layout(local_layout(args.checkpoint, model_cfg, "attention layout"))
    ref = args.ref or os.path.join(args.data, "raw", "test.tgt")
    conllu = args.conllu or os.path.join(args.data, "raw", "test.src.conllu")
    for path, what in ((ref, "--ref"), (conllu, "--conllu")):
        if not os.path.isfile(path):
            raise InputError(f"no {what} file '{path}'")
    out = Path(args.out)
    files = [Output(str(out / "prune_curve.md"), "pruning table", outputs.text_starting("| λ |")),
             Output(str(out / "prune_curve.json"), "pruning result (JSON)", outputs.text_starting("{")),
             Output(str(out / "prune_curve.png"), "figure", outputs.is_png),
             Output(str(out / "prune_roles.png"), "figure", outputs.is_png)]
    check_output_folder(str(out), files, [args.checkpoint, ref, conllu], args.force, "output folder")
    settings = {"checkpoint": _identity(args.checkpoint), "data": args.data, "ref": _identity(ref),
                "conllu": _identity(conllu), "lr": args.lr, "max_update": args.max_update, "beam": args.beam,
                "max_sentences": args.max_sentences, "rare_top": args.rare_top, "gates_only": args.gates_only,
                "train_args": extra}
    _check_plan(out / "plan.json", settings)
    train = ["--finetune-from-model", os.path.abspath(args.checkpoint), *model_flags(model_cfg),
             "--attn-layout", layout, "--decoder-gates", "self,cross", *GATE_DEFAULTS,
             "--criterion", "label_smoothed_cross_entropy_with_sparsity",
             # a constant rate: inverse_sqrt held in its warm-up, from --lr to --lr
             "--lr", str(args.lr), "--warmup-init-lr", str(args.lr), "--warmup-updates", str(2 * args.max_update),
             "--max-update", str(args.max_update), *(["--train-gates-only"] if args.gates_only else []),
             "--no-epoch-checkpoints", "--log-interval", "50"]
    plan = [("base", None)] + [(run_name(lam), lam) for lam in lambdas]
    print(f"prune-curve: {len(lambdas)} fine-tuning runs of {args.max_update} updates "
          f"(λ = {', '.join(f'{lam:g}' for lam in lambdas)}), each then translated and analysed")
    if args.dry_run:
        for name, lam in plan[1:]:
            cmd = ["bash", "scripts/train.sh", "--data", args.data, "--arch", str(model_cfg.get("arch")),
                   "--save-dir", str(out / name), "--", *train, "--gate-lambda", f"{lam:g}", *extra]
            print(" ".join(subprocess.list2cmdline([c]) for c in cmd))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "plan.json").is_file():
        outputs.write_text(out / "plan.json", json.dumps(settings, indent=1))
    rows = []
    for name, lam in plan:
        start = time.time()
        run = out / name
        run.mkdir(exist_ok=True)
        # the model at the end of fine-tuning (Voita et al.), not the best task loss
        ckpt = args.checkpoint if lam is None else str(run / "checkpoint_last.pt")
        if lam is not None:
            print(f"  {name}: fine-tuning, then translating and analysing (logs in {run})", flush=True)
            _run(["bash", "scripts/train.sh", "--data", args.data, "--arch", str(model_cfg.get("arch")),
                  "--save-dir", str(run), "--", *train, "--gate-lambda", f"{lam:g}", *extra], run / "train.out",
                 f"fine-tuning at λ={lam:g}")
        rows.append(_evaluate(args, name, lam, ckpt, run, ref, conllu))
        r = rows[-1]
        print(f"  {name}: heads kept {sum(r['kept'].values())}/{sum(r['heads'].values())}, "
              f"BLEU {r['bleu']:.2f}, roles {r['roles']} ({time.time() - start:.0f} s)", flush=True)
    _write(out, rows)
    return 0


def _identity(path: str) -> dict:
    """A file's path, size and modification time: another file in its place
    is another input."""
    st = os.stat(path)
    return {"path": path, "size": st.st_size, "mtime": int(st.st_mtime)}


def _check_plan(path: Path, settings: dict) -> None:
    """Refuse (one line) to continue ``OUT`` made from another checkpoint,
    data or settings: its finished runs would be skipped and mixed in."""
    from fairseq_local.errors import InputError

    if not path.is_file():
        return
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"'{path}' is not a prune-curve plan: use another --out") from None
    diff = [k for k in dict.fromkeys([*settings, *saved]) if saved.get(k) != json.loads(json.dumps(settings.get(k)))]
    if diff:
        raise InputError(f"'{path.parent}' holds a pruning curve made with other {', '.join(diff)} "
                         f"(see {path.name}): use another --out, or the same settings to resume it")


def _stale(target: Path, source: str) -> bool:
    return not target.is_file() or target.stat().st_mtime < os.path.getmtime(source)


def _evaluate(args, name: str, lam: Optional[float], ckpt: str, run: Path, ref: str, conllu: str) -> dict:
    """Translate, score, count heads and roles of one run (each step skipped
    when its output is newer than the checkpoint)."""
    from fairseq_local.analysis.dump import load_dump
    from fairseq_local.analysis.pruning import kept_heads, role_counts
    from fairseq_local.analysis.roles import classify, head_roles
    from fairseq_local.checkpoint_compat import read_checkpoint
    from .gates import gate_table

    bleu_file = run / "test.bleu.json"
    if _stale(bleu_file, ckpt):
        _run(["bash", "scripts/generate.sh", "--data", args.data, "--checkpoint", ckpt, "--out", str(run),
              "--ref", ref, "--beam", args.beam], run / "generate.out", f"translating with {name}")
    bleu = float(json.loads(bleu_file.read_text())["score"])
    dump = run / "dump.pt"
    if _stale(dump, ckpt):
        _run([sys.executable, "-m", "fairseq_local_cli.attention", "dump", "--path", ckpt, "--data", args.data,
              "--conllu", conllu, "--max-sentences", str(args.max_sentences), "--quiet", "--out", str(dump),
              "--force"], run / "dump.out", f"the attention dump of {name}")
    roles = classify(head_roles(load_dump(str(dump)), rare_top=args.rare_top))
    model_cfg, state = read_checkpoint(ckpt)
    dec = int(model_cfg.get("decoder_layers") or 0) * int(model_cfg.get("decoder_attention_heads") or 0)
    heads = {"enc-self": len(roles) * len(roles[0]), "dec-self": dec, "dec-cross": dec}
    kept, open_heads = dict(heads), None
    if lam is not None:
        rows = gate_table(model_cfg, state)
        kept = kept_heads(rows)
        open_heads = [[True] * len(layer) for layer in roles]
        for r in rows:
            if r["attention"] == "enc-self" and r["closed"]:
                open_heads[r["layer"] - 1][r["head"] - 1] = False
    return {"run": name, "lambda": lam, "kept": kept, "heads": heads, "bleu": bleu,
            "roles": role_counts(roles, open_heads)}


def _write(out: Path, rows: List[dict]) -> None:
    import logging

    from fairseq_local.analysis.pruning import curve_lines, curve_table, plot_curve, plot_roles

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    table = curve_table(rows)
    outputs.write_text(out / "prune_curve.md", table + "\n" + "\n".join(curve_lines(rows)) + "\n")
    outputs.write_text(out / "prune_curve.json", json.dumps({"rows": rows}, indent=1))
    plot_curve(rows, str(out / "prune_curve.png"))
    plot_roles(rows, str(out / "prune_roles.png"))
    print()
    print(table.rstrip())
    for line in curve_lines(rows):
        print(line)
    print(f"prune-curve: {out / 'prune_curve.md'} {out / 'prune_curve.json'} "
          f"{out / 'prune_curve.png'} {out / 'prune_roles.png'}")


if __name__ == "__main__":
    from .main import main as cli_main

    sys.exit(cli_main(["prune-curve", *sys.argv[1:]]))
