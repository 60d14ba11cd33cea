"""Benchmarked ops. An op is listed here always; it runs only when ``available()``
(the op exists in this build), so the bench lights up new ops after a merge."""

from .base import IMPLS, BenchContext, Workload
from .dsa import DsaMetadataCopy, DsaMetadataCopyMulti
from .trtllm_mha import TrtllmMhaMetadata, TrtllmMhaPageTable, TrtllmMhaSpecOneLaunch

REGISTRY = (TrtllmMhaMetadata, TrtllmMhaSpecOneLaunch, TrtllmMhaPageTable, DsaMetadataCopy, DsaMetadataCopyMulti)

__all__ = ["IMPLS", "REGISTRY", "BenchContext", "Workload"]
