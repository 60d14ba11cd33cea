"""Serving-trace simulator: continuous batching over a paged KV cache.

It produces, step by step, the inputs a server hands to its attention backend's
metadata refresh, and keeps the device-side pools those refreshes read
(``req_to_token``, the full->SWA slot mapping) in the state a real server would
leave them in:

* requests arrive (Poisson, with a load level that sweeps from 1 up to
  ``max_bs`` and back over the run, so every CUDA-graph bucket is visited),
  wait FCFS for a request slot and for KV capacity, decode, and finish;
* prompt and output lengths are log-normal (heavy right tail), capped so a
  request always fits its context;
* KV pages come from a FIFO free list that starts shuffled (a server that has
  been up a while): a request takes its prompt's pages at admission and one page
  at a time as it grows, finished requests' pages go to the back of the list,
  so a request's pages are scattered and reused out of order, as in SGLang's
  paged allocator (page 0 and ``req_to_token`` row 0 are the padding page/row
  and are never handed out);
* with a sliding window, every page holding a token of the last ``window``
  tokens is backed by a page of a separate SWA pool; older pages are evicted
  (their mapping entries set back to 0, SGLang's ``free_swa``);
* with speculative decoding each step writes ``num_draft_tokens`` slots per
  request and commits 1..``num_draft_tokens`` of them (acceptance per draft
  token ``accept_rate``);
* with a unified pool (``preset.unified_pool``) the page ids are virtual:
  ``v2p`` (and ``swa_v2p``) bind them to physical pages and change every step
  a request finishes (compaction moves pages), while ``req_to_token`` does not
  (``unified_pool.py``).

Host-side bookkeeping is numpy; only the per-step deltas go to the device.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from .presets import Preset
from .unified_pool import UnifiedPool


@dataclass(frozen=True)
class LengthModel:
    """Log-normal prompt/output lengths (median, sigma of the log)."""

    prompt_median: float = 1200.0
    prompt_sigma: float = 1.4
    output_median: float = 200.0
    output_sigma: float = 1.0
    accept_rate: float = 0.7  # per draft token, speculative decoding only


@dataclass
class Step:
    """One decode step's batch, as the server hands it to the attention backend.

    Attributes:
        index: step number, from 0.
        bs: running requests (unpadded batch size).
        req_pool_indices: int32 ``[bs]`` rows of ``req_to_token``.
        seq_lens: int32 ``[bs]`` the ``seq_lens`` the server passes: committed
            length + 1 in plain decode (the new token is included), the
            committed length with speculative decoding (the draft/verify
            refreshes add their own offsets).
        committed: int32 ``[bs]`` KV tokens committed before this step.
        out_cache_loc: int64 ``[bs, T]`` KV slots this step writes, for positions
            ``committed .. committed + T - 1`` (T = 1, or ``num_draft_tokens``).
        accept_lens: int32 ``[bs]`` tokens each request commits this step.
    """

    index: int
    bs: int
    req_pool_indices: np.ndarray
    seq_lens: np.ndarray
    committed: np.ndarray
    out_cache_loc: np.ndarray
    accept_lens: np.ndarray

    @property
    def tokens_per_req(self) -> int:
        return self.out_cache_loc.shape[1]

    @property
    def max_seq_len(self) -> int:
        """Host max of ``seq_lens`` (what the server reads from ``seq_lens_cpu``)."""
        return int(self.seq_lens.max()) if self.bs else 0


class PagedAllocator:
    """Pages ``1 .. num_pages - 1`` on a FIFO free list (page 0 is padding),
    initially in random order; freed pages go to the back.

    ``reserve`` books capacity for a request's whole lifetime at admission, so a
    running request never runs out; the pages themselves are taken one by one
    as the request grows, which is what interleaves them.
    """

    def __init__(self, num_pages: int, rng: np.random.Generator):
        if num_pages < 2:
            raise ValueError(f"a paged pool needs >= 2 pages, got {num_pages}")
        self.num_pages = num_pages
        # Start from the scattered free list of a server that has been up a while,
        # not from a fresh sorted one (which would hand prompts contiguous runs).
        self._free = collections.deque(int(p) for p in 1 + rng.permutation(num_pages - 1))
        self._reserved = 0

    @property
    def capacity(self) -> int:
        return self.num_pages - 1

    def can_reserve(self, n: int) -> bool:
        return self._reserved + n <= self.capacity

    def reserve(self, n: int) -> None:
        assert self.can_reserve(n)
        self._reserved += n

    def unreserve(self, n: int) -> None:
        self._reserved -= n
        assert self._reserved >= 0

    def alloc(self, n: int) -> list:
        if n > len(self._free):
            raise RuntimeError("trace: KV pool exhausted despite reservation (bench bug)")
        return [self._free.popleft() for _ in range(n)]

    def free(self, pages) -> None:
        self._free.extend(int(p) for p in pages)


@dataclass
class TraceStats:
    admitted: int = 0
    finished: int = 0
    max_queue: int = 0
    capacity_waits: int = 0  # steps where the queue head waited for KV capacity
    bs_hist: collections.Counter = field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        sizes = sorted(self.bs_hist.elements())
        return {
            "requests_admitted": self.admitted,
            "requests_finished": self.finished,
            "max_queue": self.max_queue,
            "steps_waiting_for_kv": self.capacity_waits,
            "batch_size_mean": float(np.mean(sizes)) if sizes else 0.0,
            "batch_size_max": max(sizes) if sizes else 0,
        }


def step_tokens(preset: Preset, spec: bool) -> int:
    """Slots a request writes per step: its draft tokens with speculative decoding, else one."""
    return preset.spec_draft_tokens if spec else 1


def draft_room(preset: Preset, spec: bool) -> int:
    """Tokens a request's row keeps free past its end: twice a step's writes, plus two."""
    return 2 * step_tokens(preset, spec) + 2


def min_context_len(preset: Preset, spec: bool) -> int:
    """The shortest context a trace of ``preset`` runs with: a one-token prompt and a
    one-token output beside the room past the end."""
    return draft_room(preset, spec) + 2


class ServingTrace:
    """Continuous-batching decode trace over device-resident KV index pools.

    Args:
        preset: model shape (page size, context, pool size, SWA window).
        spec: speculative decoding (``preset.spec_draft_tokens`` slots per step).
        max_bs: most requests running at once (the largest graph bucket).
        total_steps: steps the run will take (sets the load sweep's period).
        seed: makes the trace reproducible.
        device: where ``req_to_token`` and ``full_to_swa`` live.
        lengths: length distributions.

    Device state (read by the ops, updated in place every step):
        req_to_token: int32 ``[2 * max_bs + 1, context_len]``.
        full_to_swa: int64 ``[pool_tokens + page_size + 1]`` (SGLang's size; the
            last entry is -1), or None without a sliding window.
        v2p, swa_v2p: int64 ``[num_pages]`` virtual -> physical (SWA) page tables
            of a unified pool, else None.
    """

    def __init__(
        self,
        preset: Preset,
        *,
        spec: bool,
        max_bs: int,
        total_steps: int,
        seed: int,
        device: torch.device,
        lengths: LengthModel = LengthModel(),
    ):
        self.preset = preset
        self.ps = preset.page_size
        self.ctx = preset.context_len
        need = min_context_len(preset, spec)
        if self.ctx < need:
            raise ValueError(f"ServingTrace: {preset.name} needs a context of at least {need} tokens, got {self.ctx}")
        self.spec = spec
        self.T = step_tokens(preset, spec)
        self.max_bs = max_bs
        self.period = max(total_steps, 1)
        self.device = device
        self.lengths = lengths
        self.rng = np.random.default_rng(seed)
        self.stats = TraceStats()

        # Request rows: more than max_bs so freed rows come back in shuffled order.
        self.rows = 2 * max_bs + 1
        self._free_rows = collections.deque(range(1, self.rows))
        self.req_to_token = torch.zeros((self.rows, self.ctx), dtype=torch.int32, device=device)
        max_pages = preset.max_pages
        self._pages = np.zeros((self.rows, max_pages), dtype=np.int64)  # page ids per row
        self._n_pages = np.zeros(self.rows, dtype=np.int64)
        self._L = np.zeros(self.rows, dtype=np.int64)  # committed tokens
        self._target = np.zeros(self.rows, dtype=np.int64)  # committed tokens at finish
        self._reserved = np.zeros(self.rows, dtype=np.int64)

        self.pool = PagedAllocator(max(preset.kv_pool_tokens // self.ps, 2), self.rng)
        self.full_to_swa: Optional[torch.Tensor] = None
        self.window = preset.swa_window
        if self.window:
            pool_tokens = self.pool.num_pages * self.ps
            self.full_to_swa = torch.zeros(pool_tokens + self.ps + 1, dtype=torch.int64, device=device)
            self.full_to_swa[-1] = -1
            # Live SWA pages per request: those touching the window or this step's
            # writes, plus one page of straddle.
            self._swa_per_req = -(-(self.window + self.T) // self.ps) + 2
            self.swa_pool = PagedAllocator(max_bs * self._swa_per_req + 1, self.rng)
            self._swa = np.zeros((self.rows, max_pages), dtype=np.int64)  # 0 = not backed
            self._swa_lo = np.zeros(self.rows, dtype=np.int64)  # first still-backed page

        self.unified = (
            UnifiedPool(self.pool.num_pages, device, swa=bool(self.window)) if preset.unified_pool else None
        )

        self._queue: collections.deque = collections.deque()  # (prompt, output)
        self._running: list = []  # rows, in batch order
        self._last: Optional[Step] = None
        self._pending_map: list = []  # (full pages, SWA pages or 0) to write to full_to_swa
        self._index = 0
        self._offsets = np.arange(self.ps, dtype=np.int64)

    # -- load and lengths --------------------------------------------------

    def _load_level(self, t: int) -> float:
        """Target concurrency: one cosine cycle from 1 to max_bs and back."""
        return 1 + (self.max_bs - 1) * 0.5 * (1 - math.cos(2 * math.pi * t / self.period))

    def _sample_request(self) -> tuple:
        lm = self.lengths
        # Room for draft tokens past the end, a whole request inside its row and
        # inside the KV pool (so the queue head always fits an empty server).
        cap = min(self.ctx, self.pool.capacity * self.ps) - draft_room(self.preset, self.spec)
        prompt = int(np.clip(self.rng.lognormal(math.log(lm.prompt_median), lm.prompt_sigma), 1, cap - 1))
        output = int(np.clip(self.rng.lognormal(math.log(lm.output_median), lm.output_sigma), 1, cap - prompt))
        return prompt, output

    def _accept_lens(self, n: int) -> np.ndarray:
        if not self.spec:
            return np.ones(n, dtype=np.int64)
        # 1 + number of leading draft tokens accepted (each with accept_rate).
        accepted = self.rng.random((n, self.T - 1)) < self.lengths.accept_rate
        return 1 + np.cumprod(accepted, axis=1).sum(axis=1)

    # -- request lifecycle -------------------------------------------------

    def _pages_for(self, tokens: int) -> int:
        return -(-tokens // self.ps)

    def _admit(self) -> None:
        while self._queue and len(self._running) < self.max_bs and self._free_rows:
            prompt, output = self._queue[0]
            need = self._pages_for(prompt + output + 2 * self.T)
            if not self.pool.can_reserve(need) or (
                self.window and not self.swa_pool.can_reserve(self._swa_per_req)
            ):
                self.stats.capacity_waits += 1
                return
            self._queue.popleft()
            row = self._free_rows.popleft()
            self.pool.reserve(need)
            self._reserved[row] = need
            n = self._pages_for(prompt)
            pages = self.pool.alloc(n)
            self._pages[row, :n] = pages
            self._n_pages[row] = n
            self._L[row] = prompt
            self._target[row] = prompt + output
            slots = (self._pages[row, :n, None] * self.ps + self._offsets).reshape(-1)[:prompt]
            self.req_to_token[row, :prompt].copy_(torch.from_numpy(slots.astype(np.int32)))
            if self.window:
                self.swa_pool.reserve(self._swa_per_req)
                lo = max(0, (prompt - self.window) // self.ps)
                self._swa_lo[row] = lo
                self._back_swa(row, range(lo, n))
            self._running.append(row)
            self.stats.admitted += 1

    def _back_swa(self, row: int, page_idx) -> None:
        page_idx = list(page_idx)
        if not page_idx:
            return
        swa_pages = self.swa_pool.alloc(len(page_idx))
        self._swa[row, page_idx] = swa_pages
        self._pending_map.append((self._pages[row, page_idx], np.asarray(swa_pages, dtype=np.int64)))

    def _evict_swa(self, row: int, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        swa_pages = self._swa[row, lo:hi]
        self.swa_pool.free(swa_pages[swa_pages > 0])
        self._swa[row, lo:hi] = 0
        self._pending_map.append((self._pages[row, lo:hi], np.zeros(hi - lo, dtype=np.int64)))

    def _finish(self, row: int) -> None:
        n = int(self._n_pages[row])
        if self.window:
            self._evict_swa(row, int(self._swa_lo[row]), n)
            self.swa_pool.unreserve(self._swa_per_req)
        self.pool.free(self._pages[row, :n])
        self.pool.unreserve(int(self._reserved[row]))
        self._n_pages[row] = 0
        self._free_rows.append(row)
        self.stats.finished += 1

    def _flush_mapping(self) -> None:
        """Apply this step's full->SWA mapping changes on the device, in one write."""
        if not self._pending_map:
            return
        full = np.concatenate([f for f, _ in self._pending_map])
        swa = np.concatenate([s for _, s in self._pending_map])
        idx = (full[:, None] * self.ps + self._offsets).reshape(-1)
        val = np.where(swa[:, None] > 0, swa[:, None] * self.ps + self._offsets, 0).reshape(-1)
        self.full_to_swa[torch.from_numpy(idx).to(self.device)] = torch.from_numpy(val).to(self.device)
        if self.unified is not None:
            self.unified.update_swa(full, swa)
        self._pending_map = []

    # -- the step ------------------------------------------------------------

    def next_step(self) -> Step:
        """Advance the previous step's requests, admit arrivals, build this step."""
        self._pending_map = []
        if self._last is not None:
            rows = self._last.req_pool_indices.astype(np.int64)
            self._L[rows] += self._last.accept_lens
            done = self._L[rows] >= self._target[rows]
            for row in rows[done]:
                self._finish(int(row))
            keep = set(int(r) for r in rows[~done])
            self._running = [r for r in self._running if r in keep]

        t = self._index
        deficit = self._load_level(t) - len(self._running) - len(self._queue)
        arrivals = int(self.rng.poisson(max(deficit, 0.0) * 0.25))
        if not self._running and not self._queue:
            arrivals = max(arrivals, 1)  # never an empty batch
        for _ in range(arrivals):
            self._queue.append(self._sample_request())
        self.stats.max_queue = max(self.stats.max_queue, len(self._queue))
        self._admit()

        rows = np.asarray(self._running, dtype=np.int64)
        bs = len(rows)
        L = self._L[rows]
        if self.window:
            # Evict pages that left the window before backing new ones, so a
            # request never holds more SWA pages than it reserved.
            new_lo = np.maximum(0, (L - self.window) // self.ps)
            for i in np.nonzero(new_lo > self._swa_lo[rows])[0]:
                row = int(rows[i])
                self._evict_swa(row, int(self._swa_lo[row]), int(new_lo[i]))
                self._swa_lo[row] = new_lo[i]
        # Pages to hold every position this step writes (L .. L + T - 1).
        need = -(-(L + self.T) // self.ps)
        for i in np.nonzero(need > self._n_pages[rows])[0]:
            row, have = int(rows[i]), int(self._n_pages[rows[i]])
            extra = int(need[i]) - have
            self._pages[row, have : have + extra] = self.pool.alloc(extra)
            self._n_pages[row] = have + extra
            if self.window:
                self._back_swa(row, range(have, have + extra))
        if self.window:
            self._flush_mapping()

        pos = L[:, None] + np.arange(self.T)
        slots = self._pages[rows[:, None], pos // self.ps] * self.ps + pos % self.ps
        if bs:
            r = torch.from_numpy(np.repeat(rows, self.T)).to(self.device)
            c = torch.from_numpy(pos.reshape(-1)).to(self.device)
            v = torch.from_numpy(slots.reshape(-1).astype(np.int32)).to(self.device)
            self.req_to_token.index_put_((r, c), v)

        if self.unified is not None:
            live = [self._pages[r, : self._n_pages[r]] for r in rows]
            self.unified.update(np.concatenate(live) if live else np.zeros(0, dtype=np.int64))

        seq_lens = L if self.spec else L + 1
        step = Step(
            index=t,
            bs=bs,
            req_pool_indices=rows.astype(np.int32),
            seq_lens=seq_lens.astype(np.int32),
            committed=L.astype(np.int32),
            out_cache_loc=slots.astype(np.int64),
            accept_lens=self._accept_lens(bs),
        )
        self.stats.bs_hist[bs] += 1
        self._last = step
        self._index += 1
        return step

    @property
    def v2p(self) -> Optional[torch.Tensor]:
        return None if self.unified is None else self.unified.v2p

    @property
    def swa_v2p(self) -> Optional[torch.Tensor]:
        return None if self.unified is None else self.unified.swa_v2p

    def page_contiguity(self) -> float:
        """Fraction of consecutive page pairs inside running requests that are
        adjacent page ids (1.0 = fully contiguous; low = scattered)."""
        pairs = adjacent = 0
        for row in self._running:
            p = self._pages[row, : self._n_pages[row]]
            if len(p) > 1:
                pairs += len(p) - 1
                adjacent += int((np.diff(p) == 1).sum())
        return adjacent / pairs if pairs else float("nan")
