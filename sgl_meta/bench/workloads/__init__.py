"""Benchmarked ops. An op is listed here always; it runs only when ``available()``
(the op exists in this build), so the bench lights up new ops after a merge."""

from .base import IMPLS, BenchContext, Workload
from .dsa_metadata_copy import DsaMetadataCopy, DsaMetadataCopyMulti
from .dsa_metadata import WORKLOADS as DSA_GEN_WORKLOADS
from .flash_attention_metadata import FlashAttentionMetadata, FlashAttentionSpecOneLaunch
from .kv_read_table import KvReadPageTable, KvReadTokenStream
from .trtllm_mha_metadata import TrtllmMhaMetadata, TrtllmMhaPageTable, TrtllmMhaSpecOneLaunch
from .vllm_step import VllmStep

REGISTRY = (TrtllmMhaMetadata, TrtllmMhaSpecOneLaunch, TrtllmMhaPageTable, DsaMetadataCopy, DsaMetadataCopyMulti,
            *DSA_GEN_WORKLOADS, KvReadPageTable, KvReadTokenStream, FlashAttentionMetadata, FlashAttentionSpecOneLaunch,
            VllmStep)

__all__ = ["IMPLS", "REGISTRY", "BenchContext", "Workload"]
