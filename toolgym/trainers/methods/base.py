"""Presets of the base methods: GRPO, Dr.GRPO, DAPO, GSPO, RLOO, REINFORCE++, PPO, CISPO."""

from __future__ import annotations

from toolgym.trainers.algorithms.preset import (
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    register_preset,
)

# verl's kl_loss_coef default 0.001 with low_var_kl (k3) [CODE]; DeepSeekMath used 0.04 [PRIOR].
GRPO_KL = RegularizerRef("kl_k3", 0.001)

register_preset(
    MethodPreset(
        name="grpo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("seq-mean-token-mean"),
        regularizers=(GRPO_KL,),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6, "ppo_epochs": 1},
        paper="DeepSeekMath (GRPO)",
        arxiv="2402.03300",
        evidence="[CODE] verl compute_grpo_outcome_advantage; [PRIOR] paper hyper-parameters",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="dr_grpo",
        advantage=PluginRef("dr_grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        # L_const = norm_len (set it to the max response length), else counts.max_len, else T.
        aggregator=PluginRef("seq-mean-token-sum-norm"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Understanding R1-Zero-Like Training (Dr.GRPO)",
        arxiv="2503.20783",
        evidence="[DOCS]/[CODE] TRL dr_grpo, verl seq-mean-token-sum-norm; [PRIOR] β=0, lr",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="dapo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28, "clip_c": 10.0}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(
            PluginRef("signed_correctness"),
            # 20480 = 16384 + 4096 buffer, factor 1.0 [DOCS verl docs/algo/dapo.md]
            PluginRef("overlong_shaping", {"max_len": 20480, "buffer_len": 4096}),
        ),
        group_filter=PluginRef("dynamic_sampling", {"metric": "acc", "max_num_gen_batches": 10}),
        rollout=RolloutSpec("group", 16),
        hparams={"lr": 1e-6, "lr_warmup_steps": 20},
        paper="DAPO",
        arxiv="2503.14476",
        evidence="[DOCS] clip-higher/dynamic sampling/token-mean; [CODE] overlong shaping; [PRIOR] ±1 reward, lr, G=16",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="gspo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("gspo", {"clip_low": 3e-4, "clip_high": 4e-4}),
        aggregator=PluginRef("seq-mean-token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6, "steps_per_generation": 4},
        paper="Group Sequence Policy Optimization",
        arxiv="2507.18071",
        evidence="[DOCS] ε 3e-4/4e-4 (ms-swift, paper §5.1); [CODE] verl compute_policy_loss_gspo",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="rloo",
        advantage=PluginRef("rloo"),
        loss=PluginRef("ppo_clip"),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="RLOO (Back to Basics)",
        arxiv="2402.14740",
        evidence="[CODE] verl compute_rloo_outcome_advantage",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="reinforce_pp",
        advantage=PluginRef("reinforce_pp", {"gamma": 1.0, "kl_coef": 0.0}),
        loss=PluginRef("ppo_clip"),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 1),
        hparams={"lr": 1e-6},
        paper="REINFORCE++",
        arxiv="2501.03262",
        evidence="[CODE] verl/OpenRLHF reinforce; kl_coef 0 here (set >0 with a ref) [PRIOR]",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="reinforce_pp_baseline",
        advantage=PluginRef("reinforce_pp_baseline"),
        loss=PluginRef("ppo_clip"),
        aggregator=PluginRef("token-mean"),
        regularizers=(GRPO_KL,),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="REINFORCE++ (baseline variant)",
        arxiv="2501.03262",
        evidence="[CODE] verl compute_reinforce_plus_plus_baseline_outcome_advantage",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="ppo",
        advantage=PluginRef("gae", {"gamma": 1.0, "lam": 1.0}),
        loss=PluginRef("ppo_clip"),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 1),
        hparams={"lr": 1e-6, "critic_lr": 1e-5, "value_clip": 0.5},
        paper="PPO with GAE",
        arxiv="1707.06347",
        evidence="[CODE] verl compute_gae_advantage_return, compute_value_loss; γ=λ=1 verl default",
        tier="base",
    )
)

register_preset(
    MethodPreset(
        name="cispo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("cispo", {"clip_high": 5.0}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="MiniMax-M1 (CISPO)",
        arxiv="2506.13585",
        evidence="[CODE] TRL cispo (upper clip only, ε_high 5.0 via ScaleRL [DOCS])",
        tier="base",
    )
)
