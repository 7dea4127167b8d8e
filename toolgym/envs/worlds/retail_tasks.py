"""The Retail-v0 tasks: ten kinds of customer requests over the seeded Retail world, 50 tasks in all."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from toolgym.envs.worlds.plan import Plan, unique_plan
from toolgym.envs.worlds.retail_world import (
    RETURN_WINDOW_DAYS,
    Customer,
    Order,
    OrderItem,
    RetailWorld,
    days_since_delivery,
    initial_world,
    order_total,
)
from toolgym.schemas import Task

TASK_COUNT = 50
_NEW_ADDRESSES = (
    ("12 Harbor St", "Riverton", "82501"),
    ("7 Summit Rd", "Fairview", "37062"),
    ("88 Canal Pl", "Madison", "53703"),
)
_REASONS = {"no longer needed": "I no longer need it.", "ordered by mistake": "I ordered it by mistake."}


def _start(world: RetailWorld, customer: Customer, opening: str, goal: str, by_email: bool) -> Plan:
    plan = Plan(opening=opening, instructions=f"You are {customer.first_name} {customer.last_name}. {goal}")
    if by_email:
        plan.fact(["email"], f"My email is {customer.email}.")
        plan.say("I can help with that. To verify your identity, could you please give me your email address?")
        plan.call("find_customer_by_email", email=customer.email)
    else:
        plan.fact(["zip"], f"I'm {customer.first_name} {customer.last_name}, zip code {customer.address.zip}.")
        plan.say("I can help with that. To verify your identity, could you tell me your full name and zip code?")
        plan.call(
            "find_customer_by_name_zip",
            first_name=customer.first_name,
            last_name=customer.last_name,
            zip=customer.address.zip,
        )
    return plan


def _orders(world: RetailWorld, test: Callable[[Order], bool]) -> list[Order]:
    return [o for o in world.orders.values() if test(o)]


def _recent(world: RetailWorld, order: Order) -> bool:
    days = days_since_delivery(world, order)
    return order.status == "delivered" and days is not None and days <= RETURN_WINDOW_DAYS


def _pick(rng: np.random.Generator, orders: list[Order]) -> Order:
    return orders[int(rng.integers(len(orders)))]


def _address_fact(plan: Plan, rng: np.random.Generator) -> tuple[str, str, str]:
    street, city, zip_code = _NEW_ADDRESSES[int(rng.integers(len(_NEW_ADDRESSES)))]
    plan.fact(["new address"], f"The new address is {street}, {city}, {zip_code}.")
    return street, city, zip_code


def _cancel_steps(plan: Plan, order: Order, reason: str) -> None:
    plan.call("get_order_details", order_id=order.id)
    plan.confirm_and_call(
        f"I will cancel order {order.id} (reason: {reason}); the {order_total(order):.2f} you paid goes back to the "
        "original payment method.",
        "cancel_pending_order",
        order_id=order.id,
        reason=reason,
    )


def cancel(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: o.status == "pending"))
    reason = sorted(_REASONS)[int(rng.integers(2))]
    customer = world.customers[order.customer_id]
    plan = _start(world, customer, "Hi, I'd like to cancel an order.", f"Cancel order {order.id}.", by_email)
    plan.fact(["order number"], f"It's order {order.id}.").fact(["why"], _REASONS[reason])
    plan.say("Thanks. What is the order number, and why do you want to cancel it?")
    _cancel_steps(plan, order, reason)
    return plan.finish()


def order_address(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: o.status == "pending"))
    customer = world.customers[order.customer_id]
    goal = f"Ship pending order {order.id} to a new address."
    plan = _start(world, customer, "Hello, I need to change where one of my orders is shipped.", goal, by_email)
    plan.fact(["order number"], f"Order {order.id}.")
    street, city, zip_code = _address_fact(plan, rng)
    plan.say("Thank you. Which order number is it, and what is the new address?")
    plan.call("get_order_details", order_id=order.id)
    plan.confirm_and_call(
        f"I will change the shipping address of order {order.id} to {street}, {city} {zip_code}.",
        "modify_pending_order_address",
        order_id=order.id,
        street=street,
        city=city,
        zip=zip_code,
    )
    return plan.finish()


def _confirm_address_change(plan: Plan, customer_id: str, street: str, city: str, zip_code: str) -> None:
    plan.confirm_and_call(
        f"I will set your default address to {street}, {city} {zip_code}.",
        "modify_customer_address",
        customer_id=customer_id,
        street=street,
        city=city,
        zip=zip_code,
    )


def customer_address(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    customer = world.customers[sorted(world.customers)[int(rng.integers(len(world.customers)))]]
    opening = "Hi, I moved recently and want to update the default address on my account."
    plan = _start(world, customer, opening, "Update your default address.", by_email)
    street, city, zip_code = _address_fact(plan, rng)
    plan.say("Verified, thank you. What is the new address?")
    _confirm_address_change(plan, customer.id, street, city, zip_code)
    return plan.finish()


def _return(world: RetailWorld, rng: np.random.Generator, by_email: bool, to_gift_card: bool) -> Plan:
    def eligible(o: Order) -> bool:
        methods = world.customers[o.customer_id].payment_methods.values()
        return _recent(world, o) and (not to_gift_card or any(m.kind == "gift_card" for m in methods))

    order = _pick(rng, _orders(world, eligible))
    customer = world.customers[order.customer_id]
    item = order.items[int(rng.integers(len(order.items)))]
    gift = next((m.id for m in customer.payment_methods.values() if m.kind == "gift_card"), None)
    destination = gift if to_gift_card and gift else order.payments[0].payment_method_id
    where = "on my gift card" if to_gift_card else "to the original payment method"
    goal = f"Return the {item.name} from order {order.id}; refund {where}."
    plan = _start(world, customer, "Hi, I want to return something I bought.", goal, by_email)
    plan.fact(["order number"], f"The order number is {order.id}.").fact(["which item"], f"The {item.name}.")
    plan.fact(["where refund"], f"Please put the refund {where}.")
    plan.say("Thanks. What is the order number, which item do you want to return, and where should the refund go?")
    plan.call("get_order_details", order_id=order.id)
    plan.confirm_and_call(
        f"I will return the {item.name} ({item.item_id}) from order {order.id} and refund {item.price:.2f} to "
        f"{destination}.",
        "return_delivered_order_items",
        order_id=order.id,
        item_ids=[item.item_id],
        payment_method_id=destination,
    )
    return plan.finish()


def return_original(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    return _return(world, rng, by_email, to_gift_card=False)


def return_gift_card(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    return _return(world, rng, by_email, to_gift_card=True)


def _exchangeable(world: RetailWorld, order: Order) -> list[tuple[OrderItem, str]]:
    pairs = []
    for item in order.items:
        variants = world.products[item.product_id].variants.values()
        pairs += [(item, v.item_id) for v in variants if v.available and v.item_id != item.item_id]
    return pairs


def exchange(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: _recent(world, o) and bool(_exchangeable(world, o))))
    pairs = _exchangeable(world, order)
    item, new_id = pairs[int(rng.integers(len(pairs)))]
    variant = world.products[item.product_id].variants[new_id]
    options = ", ".join(f"{k} {v}" for k, v in variant.options.items())
    customer = world.customers[order.customer_id]
    goal = f"Exchange the {item.name} of order {order.id} for the variant with {options}."
    plan = _start(world, customer, "Hi, I'd like to exchange an item for a different variant.", goal, by_email)
    plan.fact(["order number"], f"It's order {order.id}.").fact(["which item"], f"The {item.name}.")
    plan.fact(["which variant"], f"I'd like the one with {options}.")
    plan.say("Thanks. What is the order number, which item is it, and which variant would you like instead?")
    plan.call("get_order_details", order_id=order.id).call("get_product_details", product_id=item.product_id)
    difference = variant.price - item.price
    plan.confirm_and_call(
        f"I will exchange the {item.name} ({item.item_id}) in order {order.id} for item {new_id} ({options}); the "
        f"price difference of {difference:.2f} is settled with the original payment method.",
        "exchange_delivered_order_items",
        order_id=order.id,
        item_ids=[item.item_id],
        new_item_ids=[new_id],
        payment_method_id=order.payments[0].payment_method_id,
    )
    return plan.finish()


def lookup_total(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, list(world.orders.values()))
    customer = world.customers[order.customer_id]
    goal = f"Find out how much you paid in total for order {order.id}."
    plan = _start(world, customer, "Hi, how much did I pay for one of my orders?", goal, by_email)
    plan.fact(["order number"], f"Order {order.id}.")
    plan.say("Sure. What is the order number?")
    plan.call("get_order_details", order_id=order.id)
    total = f"{order_total(order):.2f}"
    plan.outputs.append(total)
    return plan.finish(f"You paid {total} in total for order {order.id}.")


def refuse_late_return(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: o.status == "delivered" and not _recent(world, o)))
    customer = world.customers[order.customer_id]
    item = order.items[0]
    goal = f"Return the {item.name} from order {order.id} (it arrived weeks ago)."
    plan = _start(world, customer, "Hello, I want to return an item.", goal, by_email)
    plan.fact(["order number"], f"Order {order.id}.").fact(["which item"], f"The {item.name}.")
    plan.say("Thanks. What is the order number, and which item do you want to return?")
    plan.call("get_order_details", order_id=order.id)
    days = days_since_delivery(world, order)
    plan.forbid("late_return", "return_delivered_order_items", order_id=order.id)
    plan.forbid("late_exchange", "exchange_delivered_order_items", order_id=order.id)
    return plan.finish(
        f"I'm sorry, order {order.id} was delivered {days} days ago, outside our {RETURN_WINDOW_DAYS}-day return "
        "window, so I cannot accept a return."
    )


def refuse_cancel_processed(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: o.status == "processed"))
    customer = world.customers[order.customer_id]
    plan = _start(world, customer, "Hi, please cancel my order.", f"Cancel order {order.id}.", by_email)
    plan.fact(["order number"], f"It's {order.id}.").fact(["why"], "I no longer need it.")
    plan.say("Thanks. What is the order number, and why do you want to cancel it?")
    plan.call("get_order_details", order_id=order.id)
    return plan.finish(
        f"I'm sorry, order {order.id} has already been processed for shipping; only pending orders can be cancelled."
    )


def cancel_then_address(world: RetailWorld, rng: np.random.Generator, by_email: bool) -> Plan:
    order = _pick(rng, _orders(world, lambda o: o.status == "pending"))
    customer = world.customers[order.customer_id]
    street, city, zip_code = _NEW_ADDRESSES[int(rng.integers(len(_NEW_ADDRESSES)))]
    goal = f"Cancel order {order.id} (no longer needed), then set your default address to {street}, {city}."
    plan = _start(world, customer, "Hi, I'd like to cancel an order.", goal, by_email)
    plan.fact(["order number"], f"It's order {order.id}.").fact(["why"], _REASONS["no longer needed"])
    plan.requests.append(f"Please also change my default address to {street}, {city}, {zip_code}.")
    plan.say("Thanks. What is the order number, and why do you want to cancel it?")
    _cancel_steps(plan, order, "no longer needed")
    plan.finish()
    _confirm_address_change(plan, customer.id, street, city, zip_code)
    return plan.finish()


Kind = Callable[[RetailWorld, np.random.Generator, bool], Plan]
KINDS: tuple[Kind, ...] = (
    cancel,
    order_address,
    customer_address,
    return_original,
    return_gift_card,
    exchange,
    lookup_total,
    refuse_late_return,
    refuse_cancel_processed,
    cancel_then_address,
)


def _draw(kind: Kind, world: RetailWorld, index: int, attempt: int) -> Plan:
    return kind(world, np.random.default_rng([7, index, attempt]), index % 3 != 0)


def build_tasks() -> list[Task]:
    """Every Retail task, `retail-000` … `retail-049`: kind = index mod 10, details from a seeded rng."""
    world = initial_world()
    tasks = []
    seen: set[tuple[str, ...]] = set()
    for index in range(TASK_COUNT):
        kind = KINDS[index % len(KINDS)]
        plan = unique_plan(seen, functools.partial(_draw, kind, world, index))
        tasks.append(plan.task(f"retail-{index:03d}", kind.__name__))
    return tasks
