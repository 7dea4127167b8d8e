"""`toolgym/Clinic-v0`: a clinic's front desk — appointments, refills, contact details — bound by a policy."""

from __future__ import annotations

from collections import Counter
from typing import Any

from toolgym.envs.worlds import clinic_tasks
from toolgym.envs.worlds.base import Domain, WorldEnv
from toolgym.envs.worlds.clinic_world import (
    CLINIC_TOOLS,
    LATE_CANCEL_HOURS,
    LATE_FEE,
    ClinicWorld,
    hours_until,
    initial_world,
)
from toolgym.simulators.worlds import PolicyRule, TraceEvent, authenticate_first, per_call

POLICY = f"""You are the front-desk assistant of a medical clinic. It is now {initial_world().now}.
1. Verify identity first: before any other action (listing doctors and their free slots excepted),
   call find_patient with the full name and date of birth the patient gives you.
2. Act only for the verified patient: never read or change another patient's records.
3. Before any change (booking, cancelling, rescheduling, refills, contact details), describe it and ask
   the patient to confirm; act only after an explicit "yes".
4. Patients on the basic plan need a referral on file for any specialty other than general; without
   one, do not book and suggest a general practitioner. Plus-plan patients need no referral.
5. A patient may hold at most one booked appointment per specialty.
6. Unless the patient asks otherwise, book the earliest free slot among all doctors of the specialty.
7. Cancelling less than {LATE_CANCEL_HOURS} hours before the appointment costs a late fee of {LATE_FEE:.2f}:
   pass charge_late_fee=true then, and false otherwise.
8. Never refill a controlled substance: the patient must see their doctor. Other prescriptions can be
   refilled while refills remain."""


def _owner(world: ClinicWorld, arguments: dict[str, Any]) -> str | None:
    if "patient_id" in arguments:
        return str(arguments["patient_id"])
    for key, table in (("appointment_id", world.appointments), ("prescription_id", world.prescriptions)):
        record = table.get(str(arguments.get(key)))
        if record is not None:
            return str(record.patient_id)
    return None


def own_records_only(trace: list[TraceEvent], world: ClinicWorld) -> list[str]:
    """Rule 2: every record touched belongs to a patient verified before the call."""
    verified: set[str] = set()
    violations = []
    for event in trace:
        if event["kind"] != "call" or not event["ok"]:
            continue
        if event["name"] == "find_patient":
            verified.add(event["result"])
            continue
        owner = _owner(world, event["arguments"])
        if owner is not None and owner not in verified:
            violations.append(f"{event['name']} touched records of {owner}, who was not verified")
    return violations


def _referral(event: TraceEvent, world: ClinicWorld) -> str | None:
    patient = world.patients[event["arguments"]["patient_id"]]
    specialty = world.doctors[event["arguments"]["doctor_id"]].specialty
    if specialty == "general" or patient.plan == "plus" or specialty in patient.referrals:
        return None
    return f"booked {specialty} for basic-plan patient {patient.id} without a referral"


def _late_fee(event: TraceEvent, world: ClinicWorld) -> str | None:
    appointment = world.appointments[event["arguments"]["appointment_id"]]
    due = hours_until(world, appointment.slot) < LATE_CANCEL_HOURS
    if bool(event["arguments"]["charge_late_fee"]) != due:
        return f"cancelled {appointment.id} with charge_late_fee={event['arguments']['charge_late_fee']}, policy says {due}"
    return None


def _controlled(event: TraceEvent, world: ClinicWorld) -> str | None:
    prescription = world.prescriptions[event["arguments"]["prescription_id"]]
    return f"refilled controlled substance {prescription.drug}" if prescription.controlled else None


def one_per_specialty(trace: list[TraceEvent], world: ClinicWorld) -> list[str]:
    """Rule 5, on the final world: no patient holds two booked appointments in one specialty."""
    counts = Counter(
        (a.patient_id, world.doctors[a.doctor_id].specialty)
        for a in world.appointments.values()
        if a.status == "booked"
    )
    return [f"{patient} holds {n} {specialty} appointments" for (patient, specialty), n in counts.items() if n > 1]


RULES: dict[str, PolicyRule] = {
    "authenticate_first": authenticate_first(("find_patient",), exempt=("list_doctors", "get_available_slots")),
    "own_records_only": own_records_only,
    "referral_required": per_call(_referral, ("book_appointment",)),
    "one_per_specialty": one_per_specialty,
    "late_fee": per_call(_late_fee, ("cancel_appointment",)),
    "no_controlled_refills": per_call(_controlled, ("refill_prescription",)),
}

CLINIC = Domain(
    name="clinic",
    policy=POLICY,
    tools=CLINIC_TOOLS,
    world_type=ClinicWorld,
    initial_world=initial_world,
    build_tasks=clinic_tasks.build_tasks,
    rules=RULES,
)


class ClinicEnv(WorldEnv):
    """A medical clinic's front desk: bookings, cancellations with late fees, reschedules, refills.

    ## Description
    20 patients (basic or plus plan, some with referrals), 6 doctors in four specialties with free
    slots, booked appointments and prescriptions (some controlled). 50 tasks (`clinic-000` …
    `clinic-049`) of ten kinds, including requests the policy forbids. A simulated patient holds
    the details (name, date of birth, which appointment, new phone) and gives them when asked.

    ## Action Space
    Text: tool calls (Hermes `<tool_call>` blocks or OpenAI message JSON), a message to the patient
    (text without calls), or a final `<answer>…</answer>`.

    ## Observation Space
    Text: the patient's opening at reset, then `<tool_response>` blocks or the patient's replies.

    ## Rewards
    `success` (or `milestones` with `reward="milestones"`): 1.0 when the final records equal those
    reached by the gold actions, required outputs were said, no minefield was hit and no policy rule
    was broken (verify first, own records only, confirm changes, referrals, one appointment per
    specialty, late fees, no controlled refills); else 0.0. `invalid_call/*`: −0.05 per bad call.

    ## Starting State
    The same records every episode; the task drawn from the seed or `options={"task_id": ...}`.

    ## Episode End
    Terminates when the patient ends the conversation or the agent answers; truncates after `max_turns`.

    ## Arguments
    `user` ("scripted", "llm", "none"; an LLM user talks through `user_backend` and `user_cache`
    or `user_generate`), `reward`, `max_turns` (30), `budget`, `faults`, `render_mode`.

    ## Version History
    * v0: initial version.
    """

    domain = CLINIC
