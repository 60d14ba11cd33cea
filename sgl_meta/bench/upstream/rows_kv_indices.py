"""KV index-stream rows: SGLang's own per-replay sequences beside ``build_kv_indices``
and the FlashMLA block-table kernel beside ``create_flashmla_kv_indices``.

Static pool (``req_to_token`` holds physical slots: shuffled whole pages of 64,
2048 pages a row), lengths uniform. Upstream, as its callers run it:

* FlashInfer decode (``FlashInferIndicesUpdaterDecode.call_begin_forward``):
  ``kv_indptr[1:bs+1] = torch.cumsum(lens)``, then
  ``create_flashinfer_kv_indices_triton[(bs, 1)]`` (``pack_read_stream``).
* Triton decode (``TritonAttnBackend._apply_cuda_graph_metadata``): the same,
  then ``get_num_kv_splits_triton[(1,)]``.
* Triton target verify (``TritonAttnBackend._update_target_verify_buffers``,
  4 draft tokens): ``qo_indptr[:bs+1] = torch.arange(...)``, the FlashInfer
  decode pair, ``mask_indptr[1:bs+1] = torch.cumsum(n * (seq_lens + n))``.
* Triton draft extend (``TritonAttnBackend._update_draft_extend_buffers``, 4
  draft tokens, extend lengths 1-4): ``qo_indptr[:bs+1] = torch.arange(...)``,
  ``kv_lens = torch.clamp(seq_lens - extend_seq_lens, min=0).to(torch.int32)``,
  then the FlashInfer decode pair over ``kv_lens``.
* Triton decode's sliding-window stream (``update_sliding_window_buffer``, a
  window of 127 tokens as gpt-oss's, then the window's split counts):
  ``window_kv_lens = torch.minimum(lens, 127)``, its cumsum into
  ``kv_indptr[1:bs+1]``, ``kv_start_idx = lens - window_kv_lens``, the gather
  from those starts, ``get_num_kv_splits_triton`` over ``window_kv_lens``.
* TRT-LLM MLA / FlashMLA: ``create_flashmla_kv_indices_triton[(bs, blocks)]``.
* EAGLE multi-step draft decode (3 steps): ``generate_draft_decode_kv_indices``
  as ``TritonMultiStepDraftBackend.common_template`` launches it
  (``[(steps, bs, topk)]``, int64 ids: one program per step and branch walking
  the prefix) and as ``FlashInferMultiStepDraftBackend.common_template`` does
  (int32 ids, ``NUM_STEPS`` with 8 token blocks per step and branch).

Upstream defines ``kv_indptr[1:bs+1]`` and ``mask_indptr[1:bs+1]`` (index 0
stays the buffer's zero, which ours writes), ``qo_indptr[:bs+1]``, the
``sum(len)`` ids, the split counts, and each block-table
row's ``ceil(len / 64)`` columns, every step's ``kv_indptr[s, 1:]`` and its
live ids. Cold start: the Triton kernels here compile once per constexpr set
(``ENTRY_PAGE_SIZE``, ``MAX_NUM_SEQ`` = 256 below 256 rows; the draft kernel
once per power-of-two batch, step and branch-count bucket and window).
"""

from __future__ import annotations

import functools

import torch

import sgl_meta
from sgl_meta import reference

from .fixtures import OutputSets, RowSpec, generator, live_cols, make_row, prefix_mask, request_pool, uniform_lengths
from .loader import TRITON, next_power_of_2

PAGE_SIZE = 64
PAGES = 2048
STREAM_BS = 64
CORES, HEADS, KV_HEADS, MAX_SPLITS = 132, 32, 8, 8
VERIFY_TOKENS = 4
WINDOW = 127  # gpt-oss: its config's sliding_window - 1
FLASHINFER, FLASHMLA, SPLITS = ("create_flashinfer_kv_indices_triton", "create_flashmla_kv_indices_triton",
                                "get_num_kv_splits_triton")
DRAFT = "generate_draft_decode_kv_indices"
DRAFT_STEPS, DRAFT_BLOCKS = 3, 8


class Fixture:
    def __init__(self, ctx):
        dev, n = ctx.device, ctx.max_bs
        gen = generator(dev, ctx.seed * 7919 + 71)
        self.n = n
        self.req_to_token, self.req_pool_indices = request_pool(n, PAGES, PAGE_SIZE, dev, gen)
        self.lens = uniform_lengths(n, 1, PAGES * PAGE_SIZE, dev, gen)
        self.tokens = int(self.lens[:STREAM_BS].long().sum())  # once, at setup
        self.extend = torch.randint(1, VERIFY_TOKENS + 1, (STREAM_BS,), generator=gen, device=dev,
                                    dtype=torch.int32)
        self.prefix_tokens = int((self.lens[:STREAM_BS].long() - self.extend.long()).clamp(min=0).sum())
        self.window_tokens = int(self.lens[:STREAM_BS].long().clamp(max=WINDOW).sum())
        self.out = OutputSets({"kv_indptr": ((STREAM_BS + 1,), torch.int32), "kv_indices": ((self.tokens,), torch.int32),
                               "num_kv_splits": ((STREAM_BS,), torch.int32), "uneven_batch": ((1,), torch.int32),
                               "qo_indptr": ((STREAM_BS + 1,), torch.int64),
                               "mask_indptr": ((STREAM_BS + 1,), torch.int64),
                               "table": ((n, PAGES), torch.int32)}, dev, gen)
        # SGLang's kv_indptr and mask_indptr buffers start zeroed: its kernel reads kv_indptr[0] as row 0's
        # start, and neither is written there.
        self.out.poison["kv_indptr"][0] = 0
        self.out.poison["mask_indptr"][0] = 0
        self.out.repoison(["kv_indptr", "mask_indptr"])


def _fixture(ctx) -> Fixture:
    return ctx.fixture("kv_indices", Fixture)


def upstream_stream(up, f: Fixture, out: dict, splits: bool, mode: str, bs: int = STREAM_BS) -> None:
    """SGLang's sequence over the first ``bs`` requests of ``f`` (a ``Fixture`` or ``ColdStreamFixture``)."""
    lens, n = f.lens[:bs], VERIFY_TOKENS
    if mode != "decode":
        out["qo_indptr"][: bs + 1] = torch.arange(0, (1 + bs) * n, step=n, dtype=torch.int32, device=lens.device)
    if mode == "extend":
        lens = torch.clamp(lens - f.extend[:bs], min=0).to(torch.int32)
    start = None
    if mode == "window":
        window_lens = torch.minimum(lens, torch.tensor(WINDOW))
        start, lens = lens - window_lens, window_lens
    out["kv_indptr"][1: bs + 1] = torch.cumsum(lens, dim=0)
    getattr(up, FLASHINFER)[(bs, 1)](f.req_to_token, f.req_pool_indices[:bs], lens, out["kv_indptr"], start,
                                     out["kv_indices"], f.req_to_token.stride(0))
    if splits:
        getattr(up, SPLITS)[(1,)](out["num_kv_splits"], lens, bs, 1, HEADS, KV_HEADS, MAX_SPLITS, CORES,
                                  MAX_NUM_SEQ=max(256, next_power_of_2(bs)),
                                  uneven_batch_ptr=None if mode == "window" else out["uneven_batch"])
    if mode == "verify":
        out["mask_indptr"][1: bs + 1] = torch.cumsum(n * (lens + n), dim=0)


def ours_stream(fn, f: Fixture, out: dict, splits: bool, mode: str, bs: int = STREAM_BS) -> None:
    extra = dict(num_kv_splits=out["num_kv_splits"], num_head=HEADS, num_kv_head=KV_HEADS,
                 max_kv_splits=MAX_SPLITS, device_core_count=CORES) if splits else {}
    if splits and mode != "window":  # the window's split counts come without the flag
        extra["uneven_batch"] = out["uneven_batch"]
    if mode == "window":
        extra["sliding_window"] = WINDOW
    if mode == "verify":
        extra.update(qo_indptr=out["qo_indptr"], q_stride=VERIFY_TOKENS, mask_indptr=out["mask_indptr"])
    if mode == "extend":
        extra.update(qo_indptr=out["qo_indptr"], q_stride=VERIFY_TOKENS, extend_seq_lens=f.extend[:bs])
    fn(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs],
       kv_indptr=out["kv_indptr"], kv_indices=out["kv_indices"], write_indptr=True, **extra)


def build_stream(ctx, up, *, splits: bool, name: str, mode: str = "decode"):
    """A Triton / FlashInfer replay-prep row; mode: decode, verify (target verify), extend (draft extend) or
    window (decode's sliding-window stream)."""
    f = _fixture(ctx)
    calls = {impl: [functools.partial(ours_stream, fn, f, f.out[impl], splits, mode)]
             for impl, fn in (("ours", sgl_meta.build_kv_indices), ("ref", reference.build_kv_indices))}
    calls["upstream"] = [functools.partial(upstream_stream, up, f, f.out["upstream"], splits, mode)]
    names = (["kv_indptr", "kv_indices"] + (["num_kv_splits"] if splits else [])
             + (["uneven_batch"] if splits and mode != "window" else [])
             + {"decode": [], "window": [], "verify": ["qo_indptr", "mask_indptr"], "extend": ["qo_indptr"]}[mode])
    tokens = {"extend": f.prefix_tokens, "window": f.window_tokens}.get(mode, f.tokens)
    regions = {"kv_indptr": (slice(1, STREAM_BS + 1),), "kv_indices": (slice(0, tokens),),
               "num_kv_splits": (slice(0, STREAM_BS),), "uneven_batch": (slice(0, 1),),
               "qo_indptr": (slice(0, STREAM_BS + 1),), "mask_indptr": (slice(1, STREAM_BS + 1),)}
    params = dict(bs=STREAM_BS, tokens=tokens, lengths="uniform", splits=splits)
    if mode in ("verify", "extend"):
        params["draft_tokens"] = VERIFY_TOKENS
    if mode == "window":
        params["sliding_window"] = WINDOW
    return make_row(f.out, names, name=name, group="kv indices", params=params, calls=calls,
                    regions={k: regions[k] for k in names})


class ColdStreamFixture:
    """The requests of the cold-start stream calls: ``ctx.max_bs`` rows of 16 pages (the
    compiles, not the walk, are what is timed), outputs for every bucket."""

    def __init__(self, ctx):
        dev, n = ctx.device, ctx.max_bs
        gen = generator(dev, ctx.seed * 7919 + 79)
        self.req_to_token, self.req_pool_indices = request_pool(n, 16, PAGE_SIZE, dev, gen)
        self.lens = uniform_lengths(n, 1, 16 * PAGE_SIZE, dev, gen)
        tokens = int(self.lens.long().sum())  # once, at setup
        self.out = OutputSets({"kv_indptr": ((n + 1,), torch.int32), "kv_indices": ((tokens,), torch.int32),
                               "num_kv_splits": ((n,), torch.int32), "uneven_batch": ((1,), torch.int32)}, dev, gen)
        self.out.poison["kv_indptr"][0] = 0  # as SGLang's buffer: zeroed, [0] never written
        self.out.repoison(["kv_indptr"])


def flashmla_upstream(up, f: Fixture, out: torch.Tensor, bs: int) -> None:
    """SGLang's block-table launch over the first ``bs`` requests, as its MLA backends make it."""
    blocks = -(-PAGES // (4096 // PAGE_SIZE))  # get_num_kv_index_blocks_flashmla(PAGES, PAGE_SIZE)
    getattr(up, FLASHMLA)[(bs, blocks)](f.req_to_token, f.req_pool_indices[:bs], f.lens[:bs], None, out,
                                        f.req_to_token.stride(0), out.stride(0), PAGED_SIZE=PAGE_SIZE)


def flashmla_ours(fn, f: Fixture, out: torch.Tensor, bs: int) -> None:
    fn(f.req_to_token, f.req_pool_indices[:bs], f.lens[:bs], None, out, PAGE_SIZE)


def build_flashmla(ctx, up, *, bs: int, name: str):
    f = _fixture(ctx)
    calls = {"upstream": [functools.partial(flashmla_upstream, up, f, f.out["upstream"]["table"], bs)]}
    for impl, fn in (("ours", sgl_meta.create_flashmla_kv_indices), ("ref", reference.create_flashmla_kv_indices)):
        calls[impl] = [functools.partial(flashmla_ours, fn, f, f.out[impl]["table"], bs)]
    regions = {"table": prefix_mask(live_cols(f.lens[:bs], PAGE_SIZE, PAGES), (f.n, PAGES))}
    return make_row(f.out, ["table"], name=name, group="kv indices",
                    params=dict(bs=bs, page_size=PAGE_SIZE, max_pages=PAGES, lengths="uniform"), calls=calls,
                    regions=regions)


class DraftFixture:
    """Requests of one draft-decode row: rows of ``pages`` pages of 64 (default 2048), each
    length leaving room for every branch's chain (a page apart), positions the next token's."""

    def __init__(self, ctx, bs: int, topk: int, out64: bool, pages: int = 0):
        dev = ctx.device
        gen = generator(dev, ctx.seed * 7919 + 73 + bs * 10 + topk)
        pages = pages or PAGES
        self.bs, self.topk = bs, topk
        self.req_to_token, self.req_pool_indices = request_pool(bs, pages, PAGE_SIZE, dev, gen)
        room = topk * (-(-(PAGE_SIZE - 1 + DRAFT_STEPS) // PAGE_SIZE) * PAGE_SIZE + DRAFT_STEPS)  # chains' pages
        self.lens = uniform_lengths(bs, 1, pages * PAGE_SIZE - room, dev, gen)
        if bs == 1:
            self.lens.fill_(pages * PAGE_SIZE - room)
        self.positions = (self.lens.long() + 1).repeat_interleave(topk).to(torch.int32)
        total = int(self.lens.long().sum())  # once, at setup
        self.used = [total * topk + bs * topk * (s + 1) for s in range(DRAFT_STEPS)]
        dtype = torch.int64 if out64 else torch.int32
        self.out = OutputSets({"kv_indices": ((DRAFT_STEPS, self.used[-1]), dtype),
                               "kv_indptr": ((DRAFT_STEPS, bs * topk + 1), torch.int32)}, dev, gen)
        self.out.poison["kv_indptr"][:, 0] = 0  # SGLang's buffer starts zeroed; neither side writes [s, 0]
        self.out.repoison(["kv_indptr"])


def draft_upstream(up, f: DraftFixture, out: dict, bs: int, launch: str) -> None:
    """SGLang's launch over the first ``bs`` requests, as the Triton or the FlashInfer backend makes it."""
    topk = f.topk
    grid = (DRAFT_STEPS * (DRAFT_BLOCKS if launch == "flashinfer" else 1), bs, topk)
    getattr(up, DRAFT)[grid](
        f.req_pool_indices, f.req_to_token, f.lens, out["kv_indices"], out["kv_indptr"], f.positions,
        f.req_to_token.stride(0), out["kv_indices"].shape[1], out["kv_indptr"].shape[1], next_power_of_2(bs),
        next_power_of_2(DRAFT_STEPS), next_power_of_2(bs * topk), PAGE_SIZE, 0, 0, ENTRY_PAGE_SIZE=1, v2p=None,
        TRANSLATE=False, NUM_STEPS=DRAFT_STEPS if launch == "flashinfer" else 0)


def draft_ours(fn, f: DraftFixture, out: dict, bs: int) -> None:
    fn(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens, positions=f.positions,
       kv_indices=out["kv_indices"], kv_indptr=out["kv_indptr"], topk=f.topk, num_steps=DRAFT_STEPS,
       page_size=PAGE_SIZE)


def build_draft(ctx, up, *, bs: int, topk: int, launch: str, name: str):
    f = ctx.fixture(f"draft_kv_indices_{bs}_{topk}_{launch}",
                    functools.partial(DraftFixture, bs=bs, topk=topk, out64=launch == "triton"))

    calls = {"upstream": [functools.partial(draft_upstream, up, f, f.out["upstream"], bs, launch)]}
    for impl, fn in (("ours", sgl_meta.build_draft_decode_kv_indices),
                     ("ref", reference.build_draft_decode_kv_indices)):
        calls[impl] = [functools.partial(draft_ours, fn, f, f.out[impl], bs)]
    used = torch.tensor(f.used, device=ctx.device)
    regions = {"kv_indices": prefix_mask(used, (DRAFT_STEPS, f.used[-1])),
               "kv_indptr": (slice(None), slice(1, bs * topk + 1))}
    params = dict(bs=bs, topk=topk, steps=DRAFT_STEPS, page_size=PAGE_SIZE, lengths="uniform",
                  launch=launch, tokens=int(f.used[-1]))
    return make_row(f.out, ["kv_indices", "kv_indptr"], name=name, group="kv indices", params=params, calls=calls,
                    regions=regions)


_FI = f"FlashInfer decode kv_indptr + kv_indices bs{STREAM_BS} (upstream: cumsum, copy, Triton gather)"
_TR = f"Triton decode kv_indptr + kv_indices + num_kv_splits bs{STREAM_BS} (upstream: 4 launches)"
_TV = (f"Triton target verify qo_indptr + kv_indptr + kv_indices + mask_indptr bs{STREAM_BS} "
       "(upstream: 9 launches)")
_TE = (f"Triton draft extend qo_indptr + prefix lengths + kv_indptr + kv_indices bs{STREAM_BS} "
       "(upstream: 8 launches)")
_TW = (f"Triton decode, sliding window of {WINDOW}: window kv_indptr + kv_indices + num_kv_splits bs{STREAM_BS} "
       "(upstream: 6 launches)")
_MLA = "FlashMLA / TRT-LLM MLA block table bs256 x 2048 pages of 64"
_D1 = "EAGLE draft decode kv_indices + kv_indptr, 3 steps, bs1 x 128k (upstream: the Triton backend's launch)"
_D64 = "EAGLE draft decode kv_indices + kv_indptr, 3 steps, bs64 (upstream: the Triton backend's launch)"
_D4 = "EAGLE draft decode kv_indices + kv_indptr, 3 steps x top-k 4, bs16 (upstream: FlashInfer's, 8 token blocks)"
ROWS = (
    RowSpec(name=_FI, group="kv indices", families=(TRITON,), ours=("build_kv_indices",), upstream=(FLASHINFER,),
            build=lambda ctx, up: build_stream(ctx, up, splits=False, name=_FI)),
    RowSpec(name=_TR, group="kv indices", families=(TRITON,), ours=("build_kv_indices",),
            upstream=(FLASHINFER, SPLITS), build=lambda ctx, up: build_stream(ctx, up, splits=True, name=_TR)),
    RowSpec(name=_TV, group="kv indices", families=(TRITON,), ours=("build_kv_indices",), upstream=(FLASHINFER,),
            build=lambda ctx, up: build_stream(ctx, up, splits=False, name=_TV, mode="verify")),
    RowSpec(name=_TE, group="kv indices", families=(TRITON,), ours=("build_kv_indices",), upstream=(FLASHINFER,),
            build=lambda ctx, up: build_stream(ctx, up, splits=False, name=_TE, mode="extend")),
    RowSpec(name=_TW, group="kv indices", families=(TRITON,), ours=("build_kv_indices",),
            upstream=(FLASHINFER, SPLITS),
            build=lambda ctx, up: build_stream(ctx, up, splits=True, name=_TW, mode="window")),
    RowSpec(name=_MLA, group="kv indices", families=(TRITON,), ours=("create_flashmla_kv_indices",),
            upstream=(FLASHMLA,), build=lambda ctx, up: build_flashmla(ctx, up, bs=256, name=_MLA)),
    RowSpec(name=_D1, group="kv indices", families=(TRITON,), ours=("build_draft_decode_kv_indices",),
            upstream=(DRAFT,), build=lambda ctx, up: build_draft(ctx, up, bs=1, topk=1, launch="triton", name=_D1)),
    RowSpec(name=_D64, group="kv indices", families=(TRITON,), ours=("build_draft_decode_kv_indices",),
            upstream=(DRAFT,), build=lambda ctx, up: build_draft(ctx, up, bs=64, topk=1, launch="triton", name=_D64)),
    RowSpec(name=_D4, group="kv indices", families=(TRITON,), ours=("build_draft_decode_kv_indices",),
            upstream=(DRAFT,),
            build=lambda ctx, up: build_draft(ctx, up, bs=16, topk=4, launch="flashinfer", name=_D4)),
)
