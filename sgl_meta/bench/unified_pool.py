"""A unified memory pool's virtual -> physical page tables, for the trace.

SGLang's unified pool (``--enable-unified-memory``; allocator
``sglang/srt/mem_cache/allocator/unified_sub_pool.py``) keeps *virtual* token
ids in ``req_to_token`` and binds each virtual page to a physical page through
a ``v2p`` table (int64, -1 = unbound). Physical pages are handed out from the
bottom of the pool upward (a watermark), and on every free the pool
compacts eagerly: the live pages above the new watermark move down into the
holes the freed pages left. A compaction rewrites ``v2p`` entries (and moves
the KV data) but never touches ``req_to_token``: readers pick the move up
through ``v2p`` alone, which is why a read table built once and replayed in a
CUDA graph must re-translate every step.

Here the trace's page ids are the virtual pages. Every step ``update`` binds
the pages that became live, unbinds (``-1``) the pages that were freed, and
compacts as above; virtual page 0 (the padding page) stays bound to physical
page 0, the sink. The sliding-window sub-pool's table (``swa_v2p``) maps a
virtual page to its SWA page, ``-1`` once evicted from the window.
Host bookkeeping is numpy; only the changed entries go to the device.
"""

from __future__ import annotations

import numpy as np
import torch


class UnifiedPool:
    """``v2p`` (and ``swa_v2p``) over ``num_pages`` virtual and physical pages."""

    def __init__(self, num_pages: int, device: torch.device, swa: bool):
        self.num_pages = num_pages
        self.device = device
        self._v2p = np.full(num_pages, -1, dtype=np.int64)
        self._p2v = np.full(num_pages, -1, dtype=np.int64)
        self._v2p[0] = self._p2v[0] = 0  # the padding page reads the sink
        self._live = np.zeros(num_pages, dtype=bool)
        self._live[0] = True
        self.watermark = 1  # physical pages [1, watermark) are bound
        self.v2p = torch.from_numpy(self._v2p).to(device)
        self.swa_v2p = None
        if swa:
            self.swa_v2p = torch.full((num_pages,), -1, dtype=torch.int64, device=device)
            self.swa_v2p[0] = 0
        self.moved = 0  # pages moved by compaction so far
        self.bound = 0

    def update(self, live_pages: np.ndarray) -> None:
        """Bring v2p to this step's live virtual pages (bind, unbind, compact)."""
        live = np.zeros(self.num_pages, dtype=bool)
        live[live_pages] = True
        live[0] = True
        freed = np.nonzero(self._live & ~live)[0]
        new = np.nonzero(live & ~self._live)[0]
        self._live = live
        changed = [freed, new]
        if freed.size:
            changed.append(self._free(freed))
        if new.size:
            phys = np.arange(self.watermark, self.watermark + new.size, dtype=np.int64)
            assert phys[-1] < self.num_pages, "unified pool: more live pages than physical pages (bench bug)"
            self._v2p[new] = phys
            self._p2v[phys] = new
            self.watermark += new.size
            self.bound += new.size
        idx = np.unique(np.concatenate(changed))
        if idx.size:
            self.v2p[torch.from_numpy(idx).to(self.device)] = torch.from_numpy(self._v2p[idx]).to(self.device)

    def _free(self, freed: np.ndarray) -> np.ndarray:
        """Unbind ``freed`` and move the live pages above the lowered watermark
        into the holes below it. Returns the virtual pages that moved."""
        phys = self._v2p[freed]
        self._v2p[freed] = -1
        self._p2v[phys] = -1
        new_wm = self.watermark - freed.size
        holes = np.sort(phys[phys < new_wm])
        band = np.arange(new_wm, self.watermark, dtype=np.int64)
        survivors = band[self._p2v[band] >= 0]
        assert survivors.size == holes.size, "unified pool: compaction lost a page (bench bug)"
        movers = self._p2v[survivors]
        self._v2p[movers] = holes
        self._p2v[holes] = movers
        self._p2v[survivors] = -1
        self.watermark = new_wm
        self.moved += movers.size
        return movers

    def update_swa(self, full_pages: np.ndarray, swa_pages: np.ndarray) -> None:
        """SWA sub-pool binding changes: virtual page -> SWA page, 0 = evicted (-1)."""
        if self.swa_v2p is None or full_pages.size == 0:
            return
        vals = np.where(swa_pages > 0, swa_pages, -1).astype(np.int64)
        self.swa_v2p[torch.from_numpy(full_pages.astype(np.int64)).to(self.device)] = torch.from_numpy(vals).to(
            self.device)
