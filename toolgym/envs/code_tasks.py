"""Tasks of CodeInterpreter-v0: math and data questions with exact answers, each derived from its index."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from decimal import Decimal
from math import lcm

import numpy as np

from toolgym.schemas import Task

Generated = tuple[str, str, str, dict[str, str]]  # instruction, gold code, answer, files
_REGIONS = ("north", "south", "east", "west")
_PRODUCTS = {"anvil": "12.50", "bolt": "0.35", "crate": "7.25", "drill": "49.99", "easel": "23.10"}
SALES_FILE = "sales.csv"


def _primes_below(n: int) -> list[int]:
    sieve = bytearray([1]) * n
    sieve[:2] = b"\x00\x00"
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(range(p * p, n, p)))
    return [i for i in range(n) if sieve[i]]


def prime_sum(rng: np.random.Generator) -> Generated:
    n = int(rng.integers(1_000, 50_000))
    code = (
        f"n = {n}\nsieve = [True] * n\nsieve[0] = sieve[1] = False\n"
        "for p in range(2, int(n ** 0.5) + 1):\n    if sieve[p]:\n        sieve[p*p::p] = [False] * len(sieve[p*p::p])\n"
        "print(sum(i for i in range(n) if sieve[i]))"
    )
    return f"What is the sum of all prime numbers below {n}?", code, str(sum(_primes_below(n))), {}


def fibonacci_mod(rng: np.random.Generator) -> Generated:
    n, m = int(rng.integers(100, 5_000)), int(rng.integers(1_000, 1_000_000))
    a, b = 1, 1
    for _ in range(n - 2):
        a, b = b, (a + b) % m
    code = f"a, b = 1, 1\nfor _ in range({n} - 2):\n    a, b = b, (a + b) % {m}\nprint(b)"
    question = f"With F(1) = F(2) = 1 and F(k) = F(k-1) + F(k-2), what is F({n}) modulo {m}?"
    return question, code, str(b % m), {}


def collatz_steps(rng: np.random.Generator) -> Generated:
    start = int(rng.integers(1_000, 1_000_000))
    value, steps = start, 0
    while value != 1:
        value, steps = (value // 2 if value % 2 == 0 else 3 * value + 1), steps + 1
    code = f"n, steps = {start}, 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    steps += 1\nprint(steps)"
    question = f"How many steps does the Collatz sequence (n → n/2 if even, 3n+1 if odd) take from {start} to reach 1?"
    return question, code, str(steps), {}


def digit_sum_power(rng: np.random.Generator) -> Generated:
    base, exponent = int(rng.integers(2, 13)), int(rng.integers(50, 600))
    answer = sum(int(d) for d in str(base**exponent))
    code = f"print(sum(int(d) for d in str({base} ** {exponent})))"
    return f"What is the sum of the decimal digits of {base}^{exponent}?", code, str(answer), {}


def divisible_count(rng: np.random.Generator) -> Generated:
    n = int(rng.integers(10_000, 1_000_000))
    a, b, c = (int(x) for x in rng.choice(np.arange(2, 30), size=3, replace=False))
    answer = _count_divisible(n, a, b, c)
    code = f"print(sum(1 for i in range(1, {n} + 1) if (i % {a} == 0 or i % {b} == 0) and i % {c} != 0))"
    question = f"How many integers from 1 to {n} inclusive are divisible by {a} or by {b}, but not by {c}?"
    return question, code, str(answer), {}


def _count_divisible(n: int, a: int, b: int, c: int) -> int:
    """Inclusion–exclusion: |A ∪ B| − |(A ∪ B) ∩ C| for multiples of a, b, c up to n."""
    either = n // a + n // b - n // lcm(a, b)
    return either - (n // lcm(a, c) + n // lcm(b, c) - n // lcm(a, b, c))


def _sales(rng: np.random.Generator) -> list[dict[str, str]]:
    rows = []
    for _ in range(int(rng.integers(30, 60))):
        product = str(rng.choice(list(_PRODUCTS)))
        rows.append(
            {
                "region": str(rng.choice(_REGIONS)),
                "product": product,
                "units": str(int(rng.integers(1, 50))),
                "unit_price": _PRODUCTS[product],
            }
        )
    return rows


def _csv(rows: list[dict[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["region", "product", "units", "unit_price"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


_READ = f"import csv\nfrom decimal import Decimal\nrows = list(csv.DictReader(open({SALES_FILE!r})))\n"


def region_revenue(rng: np.random.Generator) -> Generated:
    rows, region = _sales(rng), str(rng.choice(_REGIONS))
    total = sum((Decimal(r["units"]) * Decimal(r["unit_price"]) for r in rows if r["region"] == region), Decimal(0))
    code = (
        _READ + f"print(sum(Decimal(r['units']) * Decimal(r['unit_price']) for r in rows if r['region'] == {region!r}))"
    )
    question = (
        f"The file {SALES_FILE} in your working directory has columns region, product, units, unit_price. "
        f"What is the total revenue (units × unit_price) of the {region} region? Give the exact amount."
    )
    return question, code, str(total), {SALES_FILE: _csv(rows)}


def top_product(rng: np.random.Generator) -> Generated:
    while True:
        rows = _sales(rng)
        totals = {p: sum(int(r["units"]) for r in rows if r["product"] == p) for p in _PRODUCTS}
        best = max(totals.values())
        if list(totals.values()).count(best) == 1:
            break
    answer = next(p for p, t in totals.items() if t == best)
    code = (
        _READ
        + "totals = {}\nfor r in rows:\n    totals[r['product']] = totals.get(r['product'], 0) + int(r['units'])\n"
    )
    code += "print(max(totals, key=totals.get))"
    question = (
        f"The file {SALES_FILE} in your working directory has columns region, product, units, unit_price. "
        "Which product sold the most units in total? Answer with the product name."
    )
    return question, code, answer, {SALES_FILE: _csv(rows)}


def rows_over(rng: np.random.Generator) -> Generated:
    rows, threshold = _sales(rng), int(rng.integers(10, 40))
    answer = sum(1 for r in rows if int(r["units"]) > threshold)
    code = _READ + f"print(sum(1 for r in rows if int(r['units']) > {threshold}))"
    question = (
        f"The file {SALES_FILE} in your working directory has columns region, product, units, unit_price. "
        f"How many rows have more than {threshold} units?"
    )
    return question, code, str(answer), {SALES_FILE: _csv(rows)}


KINDS: tuple[Callable[[np.random.Generator], Generated], ...] = (
    prime_sum,
    fibonacci_mod,
    collatz_steps,
    digit_sum_power,
    divisible_count,
    region_revenue,
    top_product,
    rows_over,
)


def python_call(code: str) -> str:
    """A gold action: one call of the `python` tool."""
    return "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"


def make_code_task(index: int) -> Task:
    """The task `code-<index>`: kind = index mod 8, numbers and data from a generator seeded with the index."""
    kind = KINDS[index % len(KINDS)]
    question, code, answer, files = kind(np.random.default_rng([13, index]))
    return Task(
        id=f"code-{index}",
        instruction=f"{question} Use the python tool, then give the final answer as <answer>...</answer>.",
        gold_actions=[python_call(code), f"<answer>{answer}</answer>"],
        answer=answer,
        metadata={"kind": kind.__name__, "files": files},
    )
