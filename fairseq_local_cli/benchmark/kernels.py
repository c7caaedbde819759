"""The kernel level of ``fairseq-local benchmark``: forward+backward of one
attention layer per case, head count and length, against the same layer with
all heads global, with scaled_dot_product_attention and the projections
alone for reference, and the peak tensor memory of each, in ``--dtype`` on
``--device`` (on CUDA: timings between ``torch.cuda.synchronize`` calls and
the peak from ``torch.cuda.max_memory_allocated``)."""

import argparse
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

from .timing import (CUDA_PEAK_MEMORY_METHOD, PEAK_MEMORY_METHOD, PerCall, Progress, Skipped, cuda_peak_memory, fmt,
                     fmt_ms, guarded, markdown_table, median, peak_memory, ratio, round_robin, settings_line)
from fairseq_local.attention.context import clear_caches
from fairseq_local.models.archs import ALL_MASKS

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# name -> (head masks for H heads, Q/K group suffix, mask mode, description)
KERNEL_CASES: Dict[str, Tuple[Callable[[int], List[str]], str, str, str]] = {
    "band2-pre": (lambda H: ["band-2"] * H, "", "pre", "every head band-2"),
    "band2-post": (lambda H: ["band-2"] * H, "", "post", "every head band-2"),
    "tied-post": (lambda H: [ALL_MASKS[h % 8] for h in range(H)], "@a", "post",
                  "Pande et al.'s (i) layer, all heads one Q/K group (masks repeated beyond 8 heads)"),
    "untied-post": (lambda H: [ALL_MASKS[h % 8] for h in range(H)], "", "post", "the same heads untied ((f)'s layer)"),
    "mixed": (lambda H: ["global"] * (H // 2) + ["band-2"] * (H - H // 2), "", "post", "half global, half band-2"),
    "star": (lambda H: ["star"] * H, "", "pre", "SparseBERT's Star"),
    "bigbird": (lambda H: ["bigbird-1-2-2"] * H, "", "pre", "SparseBERT's BigBird w=1 g=2 r=2"),
}


def kernel_layout(case: str, heads: int) -> Tuple[str, str]:
    """The one-layer ``--attn-layout`` (canonical form) and mask mode of a kernel case."""
    from fairseq_local.attention.layout import format_layout, parse_layout

    masks, group, mode, _ = KERNEL_CASES[case]
    return format_layout(parse_layout("[" + ",".join(m + group for m in masks(heads)) + "]")), mode


def _attention(layout: str, mode: str, impl: str, heads: int, dim: int, n: int, seed: int):
    from fairseq_local.attention.build import AttentionBuilder
    from fairseq_local.attention.config import AttentionConfig, attention_options

    torch.manual_seed(seed)
    options = attention_options(AttentionConfig(attn_layout=layout, mask_mode=mode, attn_impl=impl), 1, heads)
    return AttentionBuilder(options, dim, 1, heads, max_positions=n)(0)


def _device(args: argparse.Namespace) -> torch.device:
    return torch.device(getattr(args, "device", "cpu") or "cpu")


def _dtype(args: argparse.Namespace) -> torch.dtype:
    return DTYPES[getattr(args, "dtype", "fp32") or "fp32"]


def _kernel_row(case: str, H: int, n: int, args) -> Dict[str, object]:
    """Times, peak memory and differences of one (case, H, n)."""
    from fairseq_local.attention.layout import parse_layout

    device, dtype = _device(args), _dtype(args)
    cuda = device.type == "cuda"
    B, dh = args.batch, args.head_dim
    cap = None if cuda else args.max_memory  # RLIMIT_AS caps host memory only; CUDA raises its own OOM
    d = H * dh
    layout, mode = kernel_layout(case, H)
    G = len(parse_layout(layout)[0].groups)
    torch.manual_seed(args.seed)

    def new(*shape, scale: float = 1.0, zeros: bool = False, grad: bool = False) -> torch.Tensor:
        # Drawn on the CPU in fp32, so that every device and dtype sees the same numbers.
        t = torch.zeros(*shape) if zeros else torch.randn(*shape) * scale
        return t.to(device=device, dtype=dtype).requires_grad_(grad)

    x = new(n, B, d, grad=True)
    gx = new(n, B, d)
    qkv = [new(B, H, n, dh, grad=True) for _ in range(3)]
    gq = new(B, H, n, dh)
    w_in = new(2 * G * dh + d, d, scale=d ** -0.5, grad=True)
    w_out = new(d, d, scale=d ** -0.5, grad=True)
    b_in, b_out = new(2 * G * dh + d, zeros=True, grad=True), new(d, zeros=True, grad=True)

    def build(layout_: str, mode_: str, impl: str):
        return _attention(layout_, mode_, impl, H, d, n, args.seed).to(device=device, dtype=dtype)

    def sdpa():
        out = F.scaled_dot_product_attention(*qkv)
        return out, torch.autograd.grad(out, qkv, gq)

    def proj():
        out = F.linear(F.linear(x, w_in, b_in)[..., 2 * G * dh:], w_out, b_out)
        return out, torch.autograd.grad(out, [x, w_in, b_in, w_out, b_out], gx)

    def module_call(attn):
        params = [p for p in attn.parameters() if p.requires_grad]

        def run():
            out, _ = attn(x)
            return out, torch.autograd.grad(out, [x, *params], gx)
        return run

    calls = {"SDPA": sdpa, "proj": proj, "global": module_call(build(f"[global*{H}]", "post", "auto"))}
    for impl in args.impls:
        try:
            calls[impl] = module_call(build(layout, mode, impl))
        except Exception as e:
            calls[impl] = _failed(f"{type(e).__name__}: {e}")
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else None
    timers = {name: PerCall(guarded(fn, cap), args.min_time, sync) for name, fn in calls.items()}
    samples = round_robin(timers, args.repeats, args.warmup, seed=args.seed)
    row: Dict[str, object] = {"times": {k: median(v) for k, v in samples.items()},
                              "skipped": {k: str(v) for k, v in samples.items() if isinstance(v, Skipped)},
                              "memory": {}, "diff": {}}
    for name, fn in calls.items():
        if name in row["skipped"]:
            continue
        try:
            row["memory"][name] = guarded(lambda: cuda_peak_memory(fn, device) if cuda else peak_memory(fn), cap)()
        except Skipped:
            pass
    if "dense" in calls and "dense" not in row["skipped"]:
        ref = None
        for impl in args.impls:
            if impl == "dense" or impl in row["skipped"]:
                continue
            try:
                ref = ref or guarded(calls["dense"], cap)()
                out = guarded(calls[impl], cap)()
            except Skipped:
                continue
            row["diff"][impl] = max((a.float() - b.float()).abs().max().item()
                                    for a, b in zip([out[0], out[1][0]], [ref[0], ref[1][0]]))
    clear_caches()  # this row's per-length masks and index tensors do not count against the next
    if cuda:
        torch.cuda.empty_cache()  # this row's cached blocks do not count against the next
    return row


def _settings(args: argparse.Namespace, level: str, what: str) -> str:
    return settings_line(level, what, args.repeats, args.warmup, args.seed, _device(args))


def _failed(message: str) -> Callable[[], object]:
    def fail():
        raise Skipped(message.splitlines()[0][:160])
    return fail


def kernels(args: argparse.Namespace) -> str:
    """The kernel level's text."""
    impls, first = args.impls, args.impls[0]
    keys = [(c, H, n) for c in args.cases for H in args.heads for n in args.lengths]
    progress = Progress("kernels", len(keys), not args.quiet)
    rows: Dict[Tuple[str, int, int], Dict] = {}
    for key in keys:
        rows[key] = _kernel_row(*key, args)
        progress.step(f"{key[0]} H={key[1]} n={key[2]}")
    header = ["case", "mode", "H", "n", "SDPA ms", "proj ms", "global ms"]
    for impl in impls:
        header += [f"{impl} ms", f"{impl} ×global"]
    header += [f"{first} core ×SDPA", "MiB SDPA", "MiB global"] + [f"MiB {impl}" for impl in impls]
    header += [f"{impl} max abs diff" for impl in impls if impl != "dense" and "dense" in impls]
    table: List[List[str]] = []
    skipped: Dict[Tuple[str, str], List[str]] = {}  # (candidate, reason) -> rows
    for (case, H, n), row in rows.items():
        t, mem = row["times"], row["memory"]
        cells = [case, KERNEL_CASES[case][2], str(H), str(n)] + [fmt_ms(t[k]) for k in ("SDPA", "proj", "global")]
        for impl in impls:
            cells += [fmt_ms(t[impl]), fmt(ratio(t["global"], t[impl]), ".2f")]
        core = None if t[first] is None or t["proj"] is None else t[first] - t["proj"]
        cells.append(fmt(ratio(t["SDPA"], core) if core and core > 0 else None, ".2f"))
        cells += [fmt(None if mem.get(k) is None else mem[k] / 2 ** 20, ",.1f") for k in ["SDPA", "global", *impls]]
        cells += [fmt(row["diff"].get(impl), ".1e") for impl in impls if impl != "dense" and "dense" in impls]
        table.append(cells)
        for name, why in row["skipped"].items():
            skipped.setdefault((name, why), []).append(f"{case} H={H} n={n}")
    device = _device(args)
    where = f"{getattr(args, 'dtype', 'fp32')} on {'CUDA' if device.type == 'cuda' else 'the CPU'}"
    lines = [_settings(args, "kernels", f"one attention layer, forward+backward (input and weight gradients), "
                                        f"{where}, batch {args.batch}, d_h {args.head_dim}, heads "
                                        f"{' '.join(map(str, args.heads))}, lengths "
                                        f"{' '.join(map(str, args.lengths))}, at least {args.min_time:g} s a sample"),
             "", markdown_table(header, table, [False, False] + [True] * (len(header) - 2)), ""]
    lines += [
        "- global: the same layer with all H heads global, which runs F.scaled_dot_product_attention (no mask) "
        "between the same in/out projections: the baseline of every ×global column (global ms / ms, higher is "
        "faster).",
        "- SDPA: F.scaled_dot_product_attention alone on q, k, v of shape (B, H, n, d_h), no mask; proj: the "
        "layer's projections alone (fused Q/K/V in-projection of its Q/K groups, out-projection); "
        f"{first} core ×SDPA = SDPA ms / ({first} ms - proj ms), from the medians.",
        f"- MiB: {CUDA_PEAK_MEMORY_METHOD if device.type == 'cuda' else PEAK_MEMORY_METHOD}.",
        "- cases (layout at H={0}, mask mode): ".format(args.heads[0])
        + "; ".join(f"{c} = {KERNEL_CASES[c][3]}, {kernel_layout(c, args.heads[0])[0]}, {KERNEL_CASES[c][2]}"
                    for c in args.cases) + ".",
    ]
    if "dense" in impls and len(impls) > 1:
        lines.append("- max abs diff: largest |difference| from the dense path (in the same dtype), over the "
                     "output and the input gradient of one call.")
    if "tied-post" in args.cases and "untied-post" in args.cases:
        def core(t: dict) -> Optional[float]:
            return None if t[first] is None or t["proj"] is None or t[first] <= t["proj"] else t[first] - t["proj"]

        parts = []
        for H in args.heads:
            pairs = [(rows[("untied-post", H, n)]["times"], rows[("tied-post", H, n)]["times"]) for n in args.lengths]
            parts.append(f"H={H}: " + ", ".join(
                f"n={n} {fmt(ratio(u[first], t[first]), '.2f')}× (attention alone {fmt(ratio(core(u), core(t)), '.2f')}×)"
                for n, (u, t) in zip(args.lengths, pairs)))
        lines.append(f"- tied-post against untied-post ({first}; untied ms / tied ms; in brackets without each layer's "
                     "projections, H Q/K groups untied against one tied): " + "; ".join(parts) + ".")
    if skipped:
        lines.append("- '-': not measured: " + "; ".join(
            f"{name} at {'every row' if len(where) == len(rows) else ', '.join(where)}: {why}"
            for (name, why), where in skipped.items()) + ".")
    return "\n".join(lines)

