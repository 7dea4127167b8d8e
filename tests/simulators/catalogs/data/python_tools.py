"""A module of @tool functions used as a catalog source by the tests."""

from toolgym.simulators import tool


@tool(price=0.5, latency=0.2, tags=["math"])
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


@tool(read_only=False, writes=["greetings"])
def shout(text: str, times: int = 1) -> str:
    """Upper-case a text and repeat it.

    Args:
        text: what to shout.
        times: how many times.
    """
    return " ".join([text.upper()] * times)


@tool(inject=["store"])
def remember(key: str, store: dict) -> str:
    """Needs an injected store, so it cannot run on its own: the catalog simulates it."""
    return str(store.get(key))
