"""The Clinic world: patients, doctors with free slots, appointments and prescriptions — records, data, tools."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Literal

import numpy as np

from toolgym.simulators import ToolError, tool
from toolgym.simulators.worlds import Record, WorldState

Specialty = Literal["general", "cardiology", "dermatology", "pediatrics"]
NOW = "2026-05-15 09:00"
LATE_CANCEL_HOURS = 24
LATE_FEE = 40.0
_TIME = "%Y-%m-%d %H:%M"


class Patient(Record):
    id: str
    first_name: str
    last_name: str
    date_of_birth: str
    phone: str
    plan: Literal["basic", "plus"]
    referrals: list[Specialty]


class Doctor(Record):
    id: str
    name: str
    specialty: Specialty
    free_slots: list[str]


class Appointment(Record):
    id: str
    patient_id: str
    doctor_id: str
    slot: str
    status: Literal["booked", "cancelled"]
    fee: float = 0.0


class Prescription(Record):
    id: str
    patient_id: str
    drug: str
    controlled: bool
    refills_left: int
    refills_ordered: int = 0


class ClinicWorld(WorldState):
    now: str
    patients: dict[str, Patient]
    doctors: dict[str, Doctor]
    appointments: dict[str, Appointment]
    prescriptions: dict[str, Prescription]
    next_appointment: int


# ----------------------------------------------------------------------------- seeded data
_FIRST = ("Amir", "Bea", "Carlos", "Dina", "Eli", "Fatima", "Gus", "Hanna", "Ines", "Jae", "Kofi", "Lena")
_LAST = ("Abbott", "Brandt", "Costa", "Dube", "Eriksen", "Fischer", "Gomez", "Hoang", "Ito", "Jansen")
_DOCTORS: tuple[tuple[str, Specialty], ...] = (
    ("Dr. Mara Lind", "general"),
    ("Dr. Omar Haddad", "general"),
    ("Dr. Sofia Reyes", "cardiology"),
    ("Dr. Ken Mori", "cardiology"),
    ("Dr. Ada Brooks", "dermatology"),
    ("Dr. Luis Ortega", "pediatrics"),
)
_DAYS = ("2026-05-15", "2026-05-16", "2026-05-18", "2026-05-19", "2026-05-20", "2026-05-21")
_DRUGS = (("lisinopril", False), ("metformin", False), ("atorvastatin", False), ("oxycodone", True), ("adderall", True))


def _slots(rng: np.random.Generator) -> list[str]:
    candidates = [f"{day} {hour:02d}:00" for day in _DAYS for hour in range(9, 17) if f"{day} {hour:02d}:00" > NOW]
    chosen = rng.choice(len(candidates), size=14, replace=False)
    return sorted(candidates[int(i)] for i in chosen)


def _patient(rng: np.random.Generator, index: int) -> Patient:
    first, last = _FIRST[index % len(_FIRST)], _LAST[(index * 3) % len(_LAST)]
    year, month, day = 1950 + int(rng.integers(60)), 1 + int(rng.integers(12)), 1 + int(rng.integers(28))
    referrals: list[Specialty] = [s for s in ("cardiology", "dermatology") if rng.random() < 0.3]
    return Patient(
        id=f"pat_{100 + index}",
        first_name=first,
        last_name=last,
        date_of_birth=f"{year:04d}-{month:02d}-{day:02d}",
        phone=f"555-{int(rng.integers(1000, 9999))}",
        plan="plus" if index % 3 == 0 else "basic",
        referrals=referrals,
    )


def _book_initial(world: ClinicWorld, rng: np.random.Generator) -> None:
    for patient in list(world.patients.values())[::2]:
        doctor = list(world.doctors.values())[int(rng.integers(len(world.doctors)))]
        if doctor.specialty != "general" and patient.plan == "basic" and doctor.specialty not in patient.referrals:
            doctor = world.doctors["doc_1"]
        slot = doctor.free_slots[int(rng.integers(min(4, len(doctor.free_slots))))]
        book_appointment.fn(world, patient.id, doctor.id, slot)


def _build_world() -> ClinicWorld:
    rng = np.random.default_rng(20260515)
    doctors = {
        f"doc_{i + 1}": Doctor(id=f"doc_{i + 1}", name=name, specialty=specialty, free_slots=_slots(rng))
        for i, (name, specialty) in enumerate(_DOCTORS)
    }
    patients = {p.id: p for p in (_patient(rng, i) for i in range(20))}
    prescriptions = {}
    for index, patient in enumerate(patients.values()):
        drug, controlled = _DRUGS[index % len(_DRUGS)]
        rx_id = f"rx_{500 + index}"
        refills = 0 if index % 7 == 6 else int(rng.integers(1, 4))
        prescriptions[rx_id] = Prescription(
            id=rx_id, patient_id=patient.id, drug=drug, controlled=controlled, refills_left=refills
        )
    world = ClinicWorld(
        now=NOW, patients=patients, doctors=doctors, appointments={}, prescriptions=prescriptions, next_appointment=1
    )
    _book_initial(world, rng)
    return world


@functools.lru_cache(maxsize=1)
def _world_json() -> str:
    return _build_world().model_dump_json()


def initial_world() -> ClinicWorld:
    """A fresh copy of the Clinic world every task starts from (always the same data)."""
    return ClinicWorld.model_validate_json(_world_json())


# ----------------------------------------------------------------------------- helpers
def hours_until(world: ClinicWorld, slot: str) -> float:
    """Hours from the world's now to `slot`."""
    delta = datetime.strptime(slot, _TIME) - datetime.strptime(world.now, _TIME)
    return delta.total_seconds() / 3600


def _get(table: dict[str, Any], key: str, what: str) -> Any:
    if key not in table:
        raise ToolError(f"{what} {key!r} not found")
    return table[key]


def _booked(world: ClinicWorld, appointment_id: str) -> Appointment:
    appointment: Appointment = _get(world.appointments, appointment_id, "appointment")
    if appointment.status != "booked":
        raise ToolError(f"appointment {appointment_id} is {appointment.status}")
    return appointment


def _take_slot(doctor: Doctor, slot: str) -> None:
    if slot not in doctor.free_slots:
        raise ToolError(f"{doctor.name} has no free slot at {slot!r}; call get_available_slots")
    doctor.free_slots = [s for s in doctor.free_slots if s != slot]


def _free_slot(doctor: Doctor, slot: str) -> None:
    doctor.free_slots = sorted([*doctor.free_slots, slot])


# ----------------------------------------------------------------------------- tools
@tool(inject=["world"], tags=["auth"])
def find_patient(world: ClinicWorld, first_name: str, last_name: str, date_of_birth: str) -> str:
    """Verify a patient's identity by full name and date of birth; returns the patient id.

    Args:
        first_name: The patient's first name.
        last_name: The patient's last name.
        date_of_birth: Date of birth as YYYY-MM-DD.
    """
    for patient in world.patients.values():
        names = (patient.first_name.lower(), patient.last_name.lower())
        if names == (first_name.lower(), last_name.lower()) and patient.date_of_birth == date_of_birth:
            return patient.id
    raise ToolError("no patient with that name and date of birth")


@tool(inject=["world"])
def get_patient_details(world: ClinicWorld, patient_id: str) -> dict[str, Any]:
    """A patient's profile (plan, referrals, phone), appointments and prescriptions.

    Args:
        patient_id: The patient id returned by find_patient.
    """
    patient: Patient = _get(world.patients, patient_id, "patient")
    appointments = [a.model_dump() for a in world.appointments.values() if a.patient_id == patient_id]
    prescriptions = [p.model_dump() for p in world.prescriptions.values() if p.patient_id == patient_id]
    return {**patient.model_dump(), "appointments": appointments, "prescriptions": prescriptions}


@tool(inject=["world"])
def list_doctors(world: ClinicWorld, specialty: Specialty) -> list[dict[str, Any]]:
    """The clinic's doctors of one specialty.

    Args:
        specialty: One of general, cardiology, dermatology, pediatrics.
    """
    return [
        {"id": d.id, "name": d.name, "specialty": d.specialty}
        for d in world.doctors.values()
        if d.specialty == specialty
    ]


@tool(inject=["world"])
def get_available_slots(world: ClinicWorld, doctor_id: str) -> list[str]:
    """A doctor's free appointment slots ('YYYY-MM-DD HH:MM'), earliest first.

    Args:
        doctor_id: The doctor id, e.g. 'doc_1'.
    """
    return list(_get(world.doctors, doctor_id, "doctor").free_slots)


@tool(inject=["world"])
def get_appointment(world: ClinicWorld, appointment_id: str) -> dict[str, Any]:
    """One appointment: patient, doctor, slot, status and any fee.

    Args:
        appointment_id: The appointment id, e.g. 'apt_3'.
    """
    appointment: Appointment = _get(world.appointments, appointment_id, "appointment")
    return {**appointment.model_dump(), "hours_until": hours_until(world, appointment.slot)}


@tool(inject=["world"], read_only=False, writes=["appointments", "doctors"])
def book_appointment(world: ClinicWorld, patient_id: str, doctor_id: str, slot: str) -> dict[str, Any]:
    """Book a free slot of a doctor for a patient.

    Args:
        patient_id: The patient id.
        doctor_id: The doctor id.
        slot: A free slot of that doctor, 'YYYY-MM-DD HH:MM'.
    """
    _get(world.patients, patient_id, "patient")
    _take_slot(_get(world.doctors, doctor_id, "doctor"), slot)
    appointment_id = f"apt_{world.next_appointment}"
    world.next_appointment += 1
    appointment = Appointment(id=appointment_id, patient_id=patient_id, doctor_id=doctor_id, slot=slot, status="booked")
    world.appointments[appointment_id] = appointment
    return appointment.model_dump()


@tool(inject=["world"], read_only=False, writes=["appointments", "doctors"])
def cancel_appointment(world: ClinicWorld, appointment_id: str, charge_late_fee: bool) -> dict[str, Any]:
    """Cancel a booked appointment, freeing its slot; optionally charge the late-cancellation fee.

    Args:
        appointment_id: The appointment id.
        charge_late_fee: Whether to charge the late-cancellation fee.
    """
    appointment = _booked(world, appointment_id)
    _free_slot(world.doctors[appointment.doctor_id], appointment.slot)
    appointment.status, appointment.fee = "cancelled", LATE_FEE if charge_late_fee else 0.0
    return appointment.model_dump()


@tool(inject=["world"], read_only=False, writes=["appointments", "doctors"])
def reschedule_appointment(world: ClinicWorld, appointment_id: str, slot: str) -> dict[str, Any]:
    """Move a booked appointment to another free slot of the same doctor.

    Args:
        appointment_id: The appointment id.
        slot: A free slot of the same doctor, 'YYYY-MM-DD HH:MM'.
    """
    appointment = _booked(world, appointment_id)
    doctor = world.doctors[appointment.doctor_id]
    _take_slot(doctor, slot)
    _free_slot(doctor, appointment.slot)
    appointment.slot = slot
    return appointment.model_dump()


@tool(inject=["world"], read_only=False, writes=["prescriptions"])
def refill_prescription(world: ClinicWorld, prescription_id: str) -> dict[str, Any]:
    """Order one refill of a prescription that has refills left.

    Args:
        prescription_id: The prescription id, e.g. 'rx_501'.
    """
    prescription: Prescription = _get(world.prescriptions, prescription_id, "prescription")
    if prescription.refills_left < 1:
        raise ToolError(f"prescription {prescription_id} has no refills left")
    prescription.refills_left -= 1
    prescription.refills_ordered += 1
    return prescription.model_dump()


@tool(inject=["world"], read_only=False, writes=["patients"])
def update_phone(world: ClinicWorld, patient_id: str, phone: str) -> dict[str, Any]:
    """Change a patient's phone number.

    Args:
        patient_id: The patient id.
        phone: The new phone number.
    """
    patient: Patient = _get(world.patients, patient_id, "patient")
    patient.phone = phone
    return patient.model_dump()


CLINIC_TOOLS = (
    find_patient,
    get_patient_details,
    list_doctors,
    get_available_slots,
    get_appointment,
    book_appointment,
    cancel_appointment,
    reschedule_appointment,
    refill_prescription,
    update_phone,
)
