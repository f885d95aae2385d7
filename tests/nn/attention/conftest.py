"""Shared fixtures for the attention-core tests: random batched token sets and references."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor


class Helpers:
    """Random block-structured inputs and naive (loop-per-complex) reference attention."""

    @staticmethod
    def batch_vector(sizes: list[int]) -> Tensor:
        return torch.repeat_interleave(
            torch.arange(len(sizes)), torch.tensor(sizes, dtype=torch.long)
        )

    @staticmethod
    def qkv(
        n_t: int, n_s: int, heads: int, d: int, d_v: int, gen: torch.Generator, scale: float = 1.0
    ) -> tuple[Tensor, Tensor, Tensor]:
        kw = {"generator": gen, "dtype": torch.float64}
        q = torch.randn(n_t, heads, d, **kw) * scale
        k = torch.randn(n_s, heads, d, **kw) * scale
        v = torch.randn(n_s, heads, d_v, **kw)
        return q, k, v

    @staticmethod
    def block_mask(
        batch_t: Tensor, batch_s: Tensor, density: float, gen: torch.Generator
    ) -> Tensor:
        """Dense boolean (n_t, n_s) mask, random inside blocks, False across complexes."""
        same = batch_t[:, None] == batch_s[None, :]
        rand = torch.rand(same.shape, generator=gen) < density
        return same & rand

    @staticmethod
    def to_sparse(mask: Tensor, values: Tensor | None = None) -> Tensor:
        idx = mask.nonzero().t()
        values = torch.ones(idx.shape[1], dtype=torch.float64) if values is None else values[mask]
        return torch.sparse_coo_tensor(
            idx, values, tuple(mask.shape), check_invariants=True
        ).coalesce()

    @staticmethod
    def naive(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor,
        bias: Tensor | None = None,
        scale: float | None = None,
    ) -> Tensor:
        """softmax over allowed pairs, per head, with torch; zero rows without any pair."""
        d = q.shape[-1]
        scale = d**-0.5 if scale is None else scale
        scores = torch.einsum("thd,shd->hts", q, k) * scale  # (H, n_t, n_s)
        if bias is not None:
            scores = scores + bias
        scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return torch.einsum("hts,shd->thd", weights, v)

    @staticmethod
    def perm_within(batch: Tensor, gen: torch.Generator) -> Tensor:
        """A random permutation of the tokens that keeps every token in its complex."""
        perm = torch.arange(batch.numel())
        for b in batch.unique().tolist():
            idx = (batch == b).nonzero().flatten()
            perm[idx] = idx[torch.randperm(idx.numel(), generator=gen)]
        return perm


@pytest.fixture
def helpers() -> type[Helpers]:
    return Helpers


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)
