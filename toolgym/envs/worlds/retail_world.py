"""The Retail world: customers, products with variants, and orders — records, seeded data and tools."""

from __future__ import annotations

import functools
from datetime import date
from typing import Any, Literal

import numpy as np

from toolgym.simulators import ToolError, tool
from toolgym.simulators.worlds import Record, WorldState

OrderStatus = Literal["pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"]
CancelReason = Literal["no longer needed", "ordered by mistake"]
RETURN_WINDOW_DAYS = 30
TODAY = "2026-05-15"


class Variant(Record):
    item_id: str
    options: dict[str, str]
    price: float
    available: bool


class Product(Record):
    id: str
    name: str
    variants: dict[str, Variant]


class Address(Record):
    street: str
    city: str
    zip: str


class PaymentMethod(Record):
    id: str
    kind: Literal["credit_card", "gift_card", "paypal"]
    balance: float | None = None


class Customer(Record):
    id: str
    first_name: str
    last_name: str
    email: str
    address: Address
    payment_methods: dict[str, PaymentMethod]
    order_ids: list[str]


class OrderItem(Record):
    item_id: str
    product_id: str
    name: str
    options: dict[str, str]
    price: float


class Payment(Record):
    kind: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(Record):
    id: str
    customer_id: str
    status: OrderStatus
    address: Address
    items: list[OrderItem]
    payments: list[Payment]
    delivered_on: str | None = None
    cancel_reason: str | None = None
    returned_item_ids: list[str] = []
    exchanged: dict[str, str] = {}


class RetailWorld(WorldState):
    today: str
    customers: dict[str, Customer]
    products: dict[str, Product]
    orders: dict[str, Order]


# ----------------------------------------------------------------------------- seeded data
_FIRST = ("Ava", "Ben", "Chloe", "Diego", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas", "Kira", "Liam")
_LAST = ("Novak", "Okafor", "Patel", "Quinn", "Rossi", "Sato", "Tanaka", "Umar", "Vidal", "Weber")
_STREETS = ("Maple Ave", "Oak St", "Pine Rd", "Cedar Ln", "Birch Way", "Elm Ct", "Willow Dr", "Lake Blvd")
_CITIES = (("Springfield", "62701"), ("Riverton", "82501"), ("Fairview", "37062"), ("Madison", "53703"))
_PRODUCTS: dict[str, dict[str, tuple[str, ...]]] = {
    "T-shirt": {"color": ("red", "blue", "black"), "size": ("S", "M", "L")},
    "Water bottle": {"capacity": ("500ml", "750ml", "1000ml")},
    "Desk lamp": {"color": ("white", "black"), "bulb": ("LED", "halogen")},
    "Running shoes": {"size": ("8", "9", "10", "11")},
    "Backpack": {"color": ("green", "grey", "navy")},
    "Headphones": {"type": ("wired", "wireless")},
    "Coffee maker": {"capacity": ("4 cups", "8 cups", "12 cups")},
    "Yoga mat": {"thickness": ("4mm", "6mm")},
}


def _products(rng: np.random.Generator) -> dict[str, Product]:
    products: dict[str, Product] = {}
    item_number = 1001
    for p_index, (name, options) in enumerate(_PRODUCTS.items()):
        base = float(rng.integers(15, 120))
        variants: dict[str, Variant] = {}
        keys = list(options)
        combos = [dict(zip(keys, values, strict=True)) for values in _combinations([options[k] for k in keys])]
        for v_index, combo in enumerate(combos[:4]):
            item_id = f"it_{item_number}"
            item_number += 1
            price = round(base + 2.5 * v_index, 2)
            variants[item_id] = Variant(item_id=item_id, options=combo, price=price, available=v_index != 2)
        product_id = f"prod_{p_index + 1:02d}"
        products[product_id] = Product(id=product_id, name=name, variants=variants)
    return products


def _combinations(lists: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for values in lists:
        combos = [(*c, v) for c in combos for v in values]
    return combos


def _customer(rng: np.random.Generator, index: int) -> Customer:
    first, last = _FIRST[index % len(_FIRST)], _LAST[(index * 7) % len(_LAST)]
    city, zip_code = _CITIES[index % len(_CITIES)]
    cid = f"{first.lower()}_{last.lower()}_{1000 + index}"
    methods = {f"credit_card_{9000 + index}": PaymentMethod(id=f"credit_card_{9000 + index}", kind="credit_card")}
    if index % 2 == 0:
        methods[f"gift_card_{7000 + index}"] = PaymentMethod(
            id=f"gift_card_{7000 + index}", kind="gift_card", balance=float(rng.integers(20, 200))
        )
    if index % 3 == 0:
        methods[f"paypal_{5000 + index}"] = PaymentMethod(id=f"paypal_{5000 + index}", kind="paypal")
    address = Address(street=f"{int(rng.integers(1, 999))} {_STREETS[index % len(_STREETS)]}", city=city, zip=zip_code)
    email = f"{first.lower()}.{last.lower()}{index}@example.com"
    return Customer(
        id=cid, first_name=first, last_name=last, email=email, address=address, payment_methods=methods, order_ids=[]
    )


_STATUS_PLAN: tuple[tuple[OrderStatus, int | None], ...] = (
    ("pending", None),
    ("delivered", 5),
    ("delivered", 45),
    ("processed", None),
    ("delivered", 12),
)


def _order(rng: np.random.Generator, number: int, customer: Customer, products: dict[str, Product]) -> Order:
    status, age = _STATUS_PLAN[number % len(_STATUS_PLAN)]
    chosen = rng.choice(sorted(products), size=int(rng.integers(1, 4)), replace=False)
    items = []
    for product_id in chosen:
        product = products[str(product_id)]
        variant = product.variants[sorted(product.variants)[int(rng.integers(len(product.variants)))]]
        items.append(
            OrderItem(
                item_id=variant.item_id,
                product_id=product.id,
                name=product.name,
                options=variant.options,
                price=variant.price,
            )
        )
    method = sorted(customer.payment_methods)[int(rng.integers(len(customer.payment_methods)))]
    total = round(sum(i.price for i in items), 2)
    delivered_on = None if age is None else date.fromordinal(date.fromisoformat(TODAY).toordinal() - age).isoformat()
    return Order(
        id=f"#W{2000 + number}",
        customer_id=customer.id,
        status=status,
        address=customer.address.model_copy(),
        items=items,
        payments=[Payment(kind="payment", amount=total, payment_method_id=method)],
        delivered_on=delivered_on,
    )


def _build_world() -> RetailWorld:
    rng = np.random.default_rng(20260515)
    products = _products(rng)
    customers = {c.id: c for c in (_customer(rng, i) for i in range(20))}
    orders: dict[str, Order] = {}
    for number, customer in enumerate(c for c in customers.values() for _ in range(3)):
        order = _order(rng, number, customer, products)
        orders[order.id] = order
        customer.order_ids.append(order.id)
    return RetailWorld(today=TODAY, customers=customers, products=products, orders=orders)


@functools.lru_cache(maxsize=1)
def _world_json() -> str:
    return _build_world().model_dump_json()


def initial_world() -> RetailWorld:
    """A fresh copy of the Retail world every task starts from (always the same data)."""
    return RetailWorld.model_validate_json(_world_json())


# ----------------------------------------------------------------------------- helpers
def _order_of(world: RetailWorld, order_id: str) -> Order:
    if order_id not in world.orders:
        raise ToolError(f"order {order_id!r} not found; order ids look like '#W2001'")
    return world.orders[order_id]


def _require_status(order: Order, *statuses: str) -> None:
    if order.status not in statuses:
        raise ToolError(f"order {order.id} is {order.status}; this action needs status {' or '.join(statuses)}")


def _method_of(world: RetailWorld, order: Order, payment_method_id: str) -> PaymentMethod:
    methods = world.customers[order.customer_id].payment_methods
    if payment_method_id not in methods:
        raise ToolError(f"payment method {payment_method_id!r} does not belong to the order's customer")
    return methods[payment_method_id]


def _settle(method: PaymentMethod, amount: float) -> None:
    """Move `amount` onto (positive) or off (negative) a gift card; cards and PayPal need no balance."""
    if method.kind != "gift_card":
        return
    balance = round((method.balance or 0.0) + amount, 2)
    if balance < 0:
        raise ToolError(f"gift card {method.id} has insufficient balance ({method.balance:.2f})")
    method.balance = balance


def _pick_items(order: Order, item_ids: list[str]) -> list[OrderItem]:
    if not item_ids:
        raise ToolError("item_ids must name at least one item of the order")
    remaining = list(order.items)
    picked = []
    for item_id in item_ids:
        match = next((i for i in remaining if i.item_id == item_id), None)
        if match is None:
            raise ToolError(f"item {item_id!r} is not (or not that many times) in order {order.id}")
        remaining.remove(match)
        picked.append(match)
    return picked


def order_total(order: Order) -> float:
    """What the customer paid for the order (payments minus refunds)."""
    return round(sum(p.amount if p.kind == "payment" else -p.amount for p in order.payments), 2)


def days_since_delivery(world: RetailWorld, order: Order) -> int | None:
    """Days between delivery and the world's today (None if never delivered)."""
    if order.delivered_on is None:
        return None
    return date.fromisoformat(world.today).toordinal() - date.fromisoformat(order.delivered_on).toordinal()


# ----------------------------------------------------------------------------- tools
@tool(inject=["world"], tags=["auth"])
def find_customer_by_email(world: RetailWorld, email: str) -> str:
    """Authenticate a customer by email address; returns the customer id.

    Args:
        email: The customer's email address.
    """
    for customer in world.customers.values():
        if customer.email.lower() == email.strip().lower():
            return customer.id
    raise ToolError("no customer with that email")


@tool(inject=["world"], tags=["auth"])
def find_customer_by_name_zip(world: RetailWorld, first_name: str, last_name: str, zip: str) -> str:
    """Authenticate a customer by first name, last name and zip code; returns the customer id.

    Args:
        first_name: The customer's first name.
        last_name: The customer's last name.
        zip: The zip code of the customer's address.
    """
    for customer in world.customers.values():
        names = (customer.first_name.lower(), customer.last_name.lower())
        if names == (first_name.lower(), last_name.lower()) and customer.address.zip == zip:
            return customer.id
    raise ToolError("no customer with that name and zip code")


@tool(inject=["world"])
def get_customer_details(world: RetailWorld, customer_id: str) -> dict[str, Any]:
    """Profile of a customer: name, email, address, payment methods (with gift card balances) and order ids.

    Args:
        customer_id: The customer id, as returned by the find_customer tools.
    """
    if customer_id not in world.customers:
        raise ToolError(f"customer {customer_id!r} not found")
    return world.customers[customer_id].model_dump()


@tool(inject=["world"])
def get_order_details(world: RetailWorld, order_id: str) -> dict[str, Any]:
    """Details of an order: status, items (with item ids and prices), address, payments, delivery date.

    Args:
        order_id: The order id, e.g. '#W2001'.
    """
    return _order_view(world, order_id)


def _order_view(world: RetailWorld, order_id: str) -> dict[str, Any]:
    order = _order_of(world, order_id)
    return {**order.model_dump(), "total_paid": order_total(order)}


@tool(inject=["world"])
def get_product_details(world: RetailWorld, product_id: str) -> dict[str, Any]:
    """A product's variants: item ids, options, prices and availability.

    Args:
        product_id: The product id, e.g. 'prod_01' (order items carry their product id).
    """
    if product_id not in world.products:
        raise ToolError(f"product {product_id!r} not found")
    return world.products[product_id].model_dump()


@tool(inject=["world"], read_only=False, writes=["orders", "customers"])
def cancel_pending_order(world: RetailWorld, order_id: str, reason: CancelReason) -> dict[str, Any]:
    """Cancel a pending order; every payment is refunded to the payment method it came from.

    Args:
        order_id: The order id, e.g. '#W2001'.
        reason: Either 'no longer needed' or 'ordered by mistake'.
    """
    order = _order_of(world, order_id)
    _require_status(order, "pending")
    for payment in [p for p in order.payments if p.kind == "payment"]:
        _settle(_method_of(world, order, payment.payment_method_id), payment.amount)
        order.payments.append(
            Payment(kind="refund", amount=payment.amount, payment_method_id=payment.payment_method_id)
        )
    order.status, order.cancel_reason = "cancelled", reason
    return _order_view(world, order_id)


@tool(inject=["world"], read_only=False, writes=["orders"])
def modify_pending_order_address(world: RetailWorld, order_id: str, street: str, city: str, zip: str) -> dict[str, Any]:
    """Change the shipping address of a pending order.

    Args:
        order_id: The order id, e.g. '#W2001'.
        street: Street and number.
        city: City.
        zip: Zip code.
    """
    order = _order_of(world, order_id)
    _require_status(order, "pending")
    order.address = Address(street=street, city=city, zip=zip)
    return _order_view(world, order_id)


@tool(inject=["world"], read_only=False, writes=["customers"])
def modify_customer_address(world: RetailWorld, customer_id: str, street: str, city: str, zip: str) -> dict[str, Any]:
    """Change a customer's default address (existing orders keep theirs).

    Args:
        customer_id: The customer id.
        street: Street and number.
        city: City.
        zip: Zip code.
    """
    if customer_id not in world.customers:
        raise ToolError(f"customer {customer_id!r} not found")
    world.customers[customer_id].address = Address(street=street, city=city, zip=zip)
    return world.customers[customer_id].model_dump()


@tool(inject=["world"], read_only=False, writes=["orders", "customers"])
def return_delivered_order_items(
    world: RetailWorld, order_id: str, item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Request the return of items of a delivered order; their price is refunded to the given payment method.

    Args:
        order_id: The order id, e.g. '#W2001'.
        item_ids: Item ids of the order to return.
        payment_method_id: Where the refund goes (one of the customer's payment method ids).
    """
    order = _order_of(world, order_id)
    _require_status(order, "delivered")
    items = _pick_items(order, item_ids)
    method = _method_of(world, order, payment_method_id)
    amount = round(sum(i.price for i in items), 2)
    _settle(method, amount)
    order.payments.append(Payment(kind="refund", amount=amount, payment_method_id=method.id))
    order.status, order.returned_item_ids = "return requested", list(item_ids)
    return _order_view(world, order_id)


@tool(inject=["world"], read_only=False, writes=["orders", "customers"])
def exchange_delivered_order_items(
    world: RetailWorld, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Exchange items of a delivered order for other available variants of the same products.

    The price difference is charged to (or refunded to) the given payment method. An order can be
    exchanged only once.

    Args:
        order_id: The order id, e.g. '#W2001'.
        item_ids: Item ids of the order to exchange.
        new_item_ids: The new item ids, one per exchanged item, in the same order.
        payment_method_id: Pays or receives the price difference.
    """
    order = _order_of(world, order_id)
    _require_status(order, "delivered")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("item_ids and new_item_ids must have the same length")
    old_items = _pick_items(order, item_ids)
    new_variants = [_exchange_variant(world, old, new_id) for old, new_id in zip(old_items, new_item_ids, strict=True)]
    method = _method_of(world, order, payment_method_id)
    difference = round(sum(v.price for v in new_variants) - sum(i.price for i in old_items), 2)
    _settle(method, -difference)
    if difference:
        kind: Literal["payment", "refund"] = "payment" if difference > 0 else "refund"
        order.payments.append(Payment(kind=kind, amount=abs(difference), payment_method_id=method.id))
    order.status, order.exchanged = "exchange requested", dict(zip(item_ids, new_item_ids, strict=True))
    return {**_order_view(world, order_id), "price_difference": difference}


def _exchange_variant(world: RetailWorld, old: OrderItem, new_item_id: str) -> Variant:
    variants = world.products[old.product_id].variants
    if new_item_id not in variants:
        raise ToolError(f"{new_item_id!r} is not a variant of {old.name} ({old.product_id})")
    if new_item_id == old.item_id:
        raise ToolError(f"{new_item_id!r} is the same item; an exchange needs a different variant")
    if not variants[new_item_id].available:
        raise ToolError(f"{new_item_id!r} is out of stock")
    return variants[new_item_id]


RETAIL_TOOLS = (
    find_customer_by_email,
    find_customer_by_name_zip,
    get_customer_details,
    get_order_details,
    get_product_details,
    cancel_pending_order,
    modify_pending_order_address,
    modify_customer_address,
    return_delivered_order_items,
    exchange_delivered_order_items,
)
