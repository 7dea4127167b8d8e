"""`toolgym/Retail-v0`: a customer-service agent over customers, products and orders, bound by a policy."""

from __future__ import annotations

from typing import Any

from toolgym.envs.worlds import retail_tasks
from toolgym.envs.worlds.base import Domain, WorldEnv
from toolgym.envs.worlds.retail_world import (
    RETAIL_TOOLS,
    RETURN_WINDOW_DAYS,
    RetailWorld,
    days_since_delivery,
    initial_world,
)
from toolgym.simulators.worlds import PolicyRule, TraceEvent, authenticate_first, per_call

AUTH_TOOLS = ("find_customer_by_email", "find_customer_by_name_zip")
POLICY = f"""You are a customer-service agent of an online shop. Today is {initial_world().today}.
1. Authenticate first: before any other action (product look-ups excepted), identify the customer with
   find_customer_by_email or find_customer_by_name_zip, using details the customer gives you.
2. Act only for the authenticated customer: never read or change another customer's profile or orders.
3. Before any action that changes data (cancel, address change, return, exchange), describe it and ask
   the customer to confirm; act only after an explicit "yes".
4. Only pending orders can be cancelled (reason "no longer needed" or "ordered by mistake") or have
   their shipping address changed; the refund of a cancellation goes to the original payment method.
5. Only delivered orders can be returned or exchanged, and only within {RETURN_WINDOW_DAYS} days of delivery.
   Refuse anything older.
6. A return is refunded to the order's original payment method, or to one of the customer's gift cards
   if the customer asks for that. An exchange must be for an available variant of the same product, and
   the price difference is settled with the order's original payment method.
7. Never make up information; if a request is not allowed, explain why and do not act."""


def _authenticated(trace: list[TraceEvent], upto: int) -> set[str]:
    return {e["result"] for e in trace[:upto] if e["kind"] == "call" and e["ok"] and e["name"] in AUTH_TOOLS}


def _owner(world: RetailWorld, arguments: dict[str, Any]) -> str | None:
    if "customer_id" in arguments:
        return str(arguments["customer_id"])
    order = world.orders.get(str(arguments.get("order_id")))
    return order.customer_id if order is not None else None


def own_data_only(trace: list[TraceEvent], world: RetailWorld) -> list[str]:
    """Rule 2: every customer or order touched belongs to a customer authenticated before the call."""
    violations = []
    for index, event in enumerate(trace):
        if event["kind"] != "call" or not event["ok"] or event["name"] in AUTH_TOOLS:
            continue
        owner = _owner(world, event["arguments"])
        if owner is not None and owner not in _authenticated(trace, index):
            violations.append(f"{event['name']} touched data of {owner}, who was not authenticated")
    return violations


def _within_window(event: TraceEvent, world: RetailWorld) -> str | None:
    order = world.orders[event["arguments"]["order_id"]]
    days = days_since_delivery(world, order)
    if days is None or days > RETURN_WINDOW_DAYS:
        return f"{event['name']} on {order.id}, delivered {days} days ago (limit {RETURN_WINDOW_DAYS})"
    return None


def _refund_destination(event: TraceEvent, world: RetailWorld) -> str | None:
    order = world.orders[event["arguments"]["order_id"]]
    method_id = event["arguments"]["payment_method_id"]
    method = world.customers[order.customer_id].payment_methods[method_id]
    original = order.payments[0].payment_method_id
    allowed = method_id == original or (event["name"] == "return_delivered_order_items" and method.kind == "gift_card")
    return None if allowed else f"{event['name']} on {order.id} settled with {method_id}, not {original}"


RULES: dict[str, PolicyRule] = {
    "authenticate_first": authenticate_first(AUTH_TOOLS, exempt=("get_product_details",)),
    "own_data_only": own_data_only,
    "return_window": per_call(_within_window, ("return_delivered_order_items", "exchange_delivered_order_items")),
    "refund_destination": per_call(
        _refund_destination, ("return_delivered_order_items", "exchange_delivered_order_items")
    ),
}

RETAIL = Domain(
    name="retail",
    policy=POLICY,
    tools=RETAIL_TOOLS,
    world_type=RetailWorld,
    initial_world=initial_world,
    build_tasks=retail_tasks.build_tasks,
    rules=RULES,
)


class RetailEnv(WorldEnv):
    """An online shop's customer service: look-ups, cancellations, returns, exchanges, address changes.

    ## Description
    20 customers, 8 products with variants and 60 orders (pending, processed, delivered). 50 tasks
    (`retail-000` … `retail-049`) of ten kinds, including requests the policy forbids. A simulated
    user holds the details (email or name and zip, order numbers, wishes) and gives them when asked.

    ## Action Space
    Text: tool calls (Hermes `<tool_call>` blocks or OpenAI message JSON), a message to the user
    (text without calls), or a final `<answer>…</answer>`.

    ## Observation Space
    Text: the user's opening at reset, then `<tool_response>` blocks or the user's replies.

    ## Rewards
    `success` (or `milestones` with `reward="milestones"`): 1.0 when the final database equals the
    one reached by the gold actions, required outputs were said, no minefield was hit and no policy
    rule was broken (authenticate first, own data only, confirm writes, return window, refund
    destination); else 0.0. `invalid_call/*`: −0.05 per malformed or unknown call.

    ## Starting State
    The same database every episode; the task drawn from the seed or `options={"task_id": ...}`.

    ## Episode End
    Terminates when the user ends the conversation or the agent answers; truncates after `max_turns`.

    ## Arguments
    `user` ("scripted", "llm", "none"; an LLM user talks through `user_backend` and `user_cache`
    or `user_generate`), `reward`, `max_turns` (30), `budget`, `faults`, `render_mode`.

    ## Version History
    * v0: initial version.
    """

    domain = RETAIL
