"""The Clinic-v0 tasks: ten kinds of patient requests over the seeded Clinic world, 50 tasks in all."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from toolgym.envs.worlds.clinic_world import (
    LATE_CANCEL_HOURS,
    LATE_FEE,
    Appointment,
    ClinicWorld,
    Patient,
    hours_until,
    initial_world,
)
from toolgym.envs.worlds.plan import Plan, unique_plan
from toolgym.schemas import Task

TASK_COUNT = 50
_SPECIALISTS = ("cardiology", "dermatology")


def _start(patient: Patient, opening: str, goal: str) -> Plan:
    plan = Plan(opening=opening, instructions=f"You are {patient.first_name} {patient.last_name}. {goal}")
    plan.fact(
        ["date of birth"],
        f"I'm {patient.first_name} {patient.last_name}, born {patient.date_of_birth}.",
    )
    plan.say("I can help with that. To verify your identity, please tell me your full name and date of birth.")
    plan.call(
        "find_patient",
        first_name=patient.first_name,
        last_name=patient.last_name,
        date_of_birth=patient.date_of_birth,
    )
    return plan


def _booked(world: ClinicWorld, patient: Patient) -> list[Appointment]:
    return [a for a in world.appointments.values() if a.patient_id == patient.id and a.status == "booked"]


def has_specialty(world: ClinicWorld, patient: Patient, specialty: str) -> bool:
    """Whether the patient already holds a booked appointment in `specialty`."""
    return any(world.doctors[a.doctor_id].specialty == specialty for a in _booked(world, patient))


def may_see(patient: Patient, specialty: str) -> bool:
    """Policy: basic-plan patients need a referral for every specialty but general."""
    return specialty == "general" or patient.plan == "plus" or specialty in patient.referrals


def _pick(rng: np.random.Generator, items: list) -> object:  # type: ignore[type-arg]
    return items[int(rng.integers(len(items)))]


def _patients(world: ClinicWorld, test: Callable[[Patient], bool]) -> list[Patient]:
    return [p for p in world.patients.values() if test(p)]


def _book(world: ClinicWorld, rng: np.random.Generator, specialty: str, check_plan: bool) -> Plan:
    patient = _pick(rng, _patients(world, lambda p: may_see(p, specialty) and not has_specialty(world, p, specialty)))
    assert isinstance(patient, Patient)
    goal = f"Book the earliest available {specialty} appointment."
    plan = _start(patient, f"Hello, I'd like to book an appointment in {specialty}.", goal)
    if check_plan:
        plan.call("get_patient_details", patient_id=patient.id)
    plan.call("list_doctors", specialty=specialty)
    doctors = [d for d in world.doctors.values() if d.specialty == specialty]
    for doctor in doctors:
        plan.call("get_available_slots", doctor_id=doctor.id)
    slot, doctor_id = min((d.free_slots[0], d.id) for d in doctors)
    plan.confirm_and_call(
        f"The earliest {specialty} slot is {slot} with {world.doctors[doctor_id].name}. I will book it for you.",
        "book_appointment",
        patient_id=patient.id,
        doctor_id=doctor_id,
        slot=slot,
    )
    return plan.finish()


def book_general(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _book(world, rng, "general", check_plan=False)


def book_specialist(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _book(world, rng, str(_pick(rng, list(_SPECIALISTS))), check_plan=True)


def refuse_specialist(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    specialty = str(_pick(rng, list(_SPECIALISTS)))
    patient = _pick(rng, _patients(world, lambda p: not may_see(p, specialty)))
    assert isinstance(patient, Patient)
    plan = _start(patient, f"Hi, I want to see a {specialty} specialist.", f"Book a {specialty} appointment.")
    plan.call("get_patient_details", patient_id=patient.id)
    plan.forbid("booking_without_referral", "book_appointment", patient_id=patient.id)
    return plan.finish(
        f"I'm sorry: on the basic plan a {specialty} appointment needs a referral, and you have none on file. "
        "Please see a general practitioner first."
    )


def _appointment(world: ClinicWorld, rng: np.random.Generator, test: Callable[[float], bool]) -> Appointment:
    candidates = [a for a in world.appointments.values() if a.status == "booked" and test(hours_until(world, a.slot))]
    appointment = _pick(rng, candidates)
    assert isinstance(appointment, Appointment)
    return appointment


def _cancel(world: ClinicWorld, rng: np.random.Generator, late: bool) -> Plan:
    appointment = _appointment(world, rng, lambda h: (h < LATE_CANCEL_HOURS) == late)
    patient, doctor = world.patients[appointment.patient_id], world.doctors[appointment.doctor_id]
    plan = _start(patient, "Hi, I need to cancel my appointment.", f"Cancel your appointment on {appointment.slot}.")
    plan.fact(["which appointment"], f"The one with {doctor.name} on {appointment.slot}.")
    plan.call("get_patient_details", patient_id=patient.id)
    plan.say("Thanks. Which appointment would you like to cancel?")
    fee = (
        f"It is less than {LATE_CANCEL_HOURS} hours away, so a late-cancellation fee of {LATE_FEE:.2f} applies."
        if late
        else "No fee applies."
    )
    plan.confirm_and_call(
        f"I will cancel your appointment with {doctor.name} on {appointment.slot}. {fee}",
        "cancel_appointment",
        appointment_id=appointment.id,
        charge_late_fee=late,
    )
    return plan.finish()


def cancel_early(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _cancel(world, rng, late=False)


def cancel_late(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _cancel(world, rng, late=True)


def reschedule(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    appointment = _appointment(world, rng, lambda h: True)
    patient, doctor = world.patients[appointment.patient_id], world.doctors[appointment.doctor_id]
    goal = f"Move your appointment with {doctor.name} to the earliest other free time with the same doctor."
    plan = _start(patient, "Hi, can I move my appointment?", goal)
    plan.fact(["which time"], "The earliest time you have with the same doctor, please.")
    plan.call("get_patient_details", patient_id=patient.id)
    plan.say(f"I see your appointment with {doctor.name} on {appointment.slot}. Which time would suit you?")
    plan.call("get_available_slots", doctor_id=doctor.id)
    slot = doctor.free_slots[0]
    plan.confirm_and_call(
        f"I will move your appointment with {doctor.name} from {appointment.slot} to {slot}.",
        "reschedule_appointment",
        appointment_id=appointment.id,
        slot=slot,
    )
    return plan.finish()


def _prescription_plan(world: ClinicWorld, rng: np.random.Generator, controlled: bool) -> Plan:
    candidates = [
        p for p in world.prescriptions.values() if p.controlled == controlled and (controlled or p.refills_left > 0)
    ]
    prescription = candidates[int(rng.integers(len(candidates)))]
    patient = world.patients[prescription.patient_id]
    plan = _start(patient, "Hi, I need a refill of my prescription.", f"Get a refill of your {prescription.drug}.")
    plan.fact(["which medication"], f"My {prescription.drug}.")
    plan.call("get_patient_details", patient_id=patient.id)
    plan.say("Thanks. Which medication do you need refilled?")
    if controlled:
        plan.forbid("controlled_refill", "refill_prescription", prescription_id=prescription.id)
        return plan.finish(
            f"I'm sorry, {prescription.drug} is a controlled substance: refills need a visit with your doctor."
        )
    plan.confirm_and_call(
        f"I will order one refill of your {prescription.drug} ({prescription.id}).",
        "refill_prescription",
        prescription_id=prescription.id,
    )
    return plan.finish()


def refill(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _prescription_plan(world, rng, controlled=False)


def refuse_controlled_refill(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    return _prescription_plan(world, rng, controlled=True)


def update_phone(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    patient = _pick(rng, list(world.patients.values()))
    assert isinstance(patient, Patient)
    phone = f"555-{int(rng.integers(1000, 9999))}"
    plan = _start(patient, "Hi, my phone number changed.", f"Change your phone number to {phone}.")
    plan.fact(["new phone"], f"My new number is {phone}.")
    plan.say("Verified. What is your new phone number?")
    plan.confirm_and_call(f"I will change your number to {phone}.", "update_phone", patient_id=patient.id, phone=phone)
    return plan.finish()


def lookup_next(world: ClinicWorld, rng: np.random.Generator) -> Plan:
    appointment = _appointment(world, rng, lambda h: True)
    patient, doctor = world.patients[appointment.patient_id], world.doctors[appointment.doctor_id]
    plan = _start(patient, "Hi, when is my next appointment?", "Find out when your next appointment is.")
    plan.call("get_patient_details", patient_id=patient.id)
    plan.outputs.append(appointment.slot)
    return plan.finish(f"Your next appointment is on {appointment.slot} with {doctor.name}.")


KINDS: tuple[Callable[[ClinicWorld, np.random.Generator], Plan], ...] = (
    book_general,
    book_specialist,
    refuse_specialist,
    cancel_early,
    cancel_late,
    reschedule,
    refill,
    refuse_controlled_refill,
    update_phone,
    lookup_next,
)


def _draw(
    kind: Callable[[ClinicWorld, np.random.Generator], Plan], world: ClinicWorld, index: int, attempt: int
) -> Plan:
    return kind(world, np.random.default_rng([11, index, attempt]))


def build_tasks() -> list[Task]:
    """Every Clinic task, `clinic-000` … `clinic-049`: kind = index mod 10, details from a seeded rng."""
    world = initial_world()
    tasks = []
    seen: set[tuple[str, ...]] = set()
    for index in range(TASK_COUNT):
        kind = KINDS[index % len(KINDS)]
        plan = unique_plan(seen, functools.partial(_draw, kind, world, index))
        tasks.append(plan.task(f"clinic-{index:03d}", kind.__name__))
    return tasks
