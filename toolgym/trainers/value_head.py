"""ValueHead: the PPO critic head, a linear map from a policy's hidden states to token values."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from toolgym.trainers.batch import RolloutBatch


class ValueHead(nn.Module):
    """V(h_t) = w·dropout(h_t) + b per position; zero-initialized so V starts at 0.

    The learner runs the policy with `output_hidden_states=True` and feeds the last layer.
    """

    def __init__(self, hidden_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """hidden [B, T, H] -> values [B, T] (float32)."""
        out: Tensor = self.linear(self.dropout(hidden.to(self.linear.weight.dtype)))
        return out.squeeze(-1).float()


def values_for_tokens(values: Tensor) -> Tensor:
    """Align values with the RolloutBatch convention (value at t judges token t's state).

    A causal LM's hidden state at t−1 predicts token t, so V for token t is the head's output
    at t−1; position 0 gets 0. values [B, T] -> [B, T].
    """
    return torch.nn.functional.pad(values[:, :-1], (1, 0))


def token_values(model: nn.Module, head: ValueHead, batch: RolloutBatch) -> Tensor:
    """V for every token of `batch` from a transformers causal LM and the head. -> [B, T].

    Runs the model with `output_hidden_states=True` (with grad if enabled) and aligns the
    last layer's head output with `values_for_tokens`.
    """
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        output_hidden_states=True,
    )
    return values_for_tokens(head(out.hidden_states[-1]))
