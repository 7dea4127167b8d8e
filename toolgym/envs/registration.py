"""Registers every toolgym environment id with Gymnasium (imported by `import toolgym`)."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENV_IDS: dict[str, str] = {
    "toolgym/Calculator-v0": "toolgym.envs.calculator:CalculatorEnv",
    "toolgym/Calendar-v0": "toolgym.envs.calendar:CalendarEnv",
    "toolgym/SimulatedAPI-v0": "toolgym.envs.simulated_api:SimulatedAPIEnv",
    "toolgym/Remote-v0": "toolgym.envs.remote:RemoteEnv",
    "toolgym/Retail-v0": "toolgym.envs.worlds.retail:RetailEnv",
    "toolgym/Clinic-v0": "toolgym.envs.worlds.clinic:ClinicEnv",
    "toolgym/BFCL-MultiTurn-v0": "toolgym.envs.bfcl:BFCLMultiTurnEnv",
    "toolgym/CodeInterpreter-v0": "toolgym.envs.code_interpreter:CodeInterpreterEnv",
    "toolgym/PlannerWorker-v0": "toolgym.envs.planner_worker:PlannerWorkerEnv",
}


def register_envs() -> None:
    """Register every id in `ENV_IDS` once (importing toolgym twice is harmless)."""
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point, disable_env_checker=True)
