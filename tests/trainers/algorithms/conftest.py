"""Fixtures for the algorithm plug-in tests: small hand-made RolloutBatches."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from toolgym.trainers.batch import RolloutBatch


def make_batch(
    loss_mask: list[list[int]],
    reward: list[float],
    group_id: list[int],
    **fields: object,
) -> RolloutBatch:
    """A batch whose input_ids are 1..T per row, attention everywhere."""
    mask = torch.tensor(loss_mask, dtype=torch.long)
    b, t = mask.shape
    return RolloutBatch(
        input_ids=torch.arange(1, t + 1).repeat(b, 1),
        attention_mask=torch.ones(b, t, dtype=torch.long),
        loss_mask=mask,
        reward=torch.tensor(reward, dtype=torch.float32),
        group_id=torch.tensor(group_id, dtype=torch.long),
        **fields,  # type: ignore[arg-type]
    )


@pytest.fixture
def batch_factory():
    return make_batch
