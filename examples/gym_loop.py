"""A plain Gymnasium loop over toolgym/Calculator-v0 with a scripted policy that uses the tool."""

import re

import gymnasium as gym

import toolgym  # noqa: F401 - registers the toolgym/* ids


def scripted_policy(observation: str, problem: str) -> str:
    """Call the calculator on the problem's expression, then answer with its result."""
    result = re.search(r"<tool_response>(.*?)</tool_response>", observation)
    if result:
        return f"<answer>{result.group(1)}</answer>"
    expression = re.search(r"[\d(][\d\s+\-*()]*[\d)]", problem).group(0)
    return f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{expression}"}}}}</tool_call>'


def main() -> None:
    env = gym.make("toolgym/Calculator-v0")
    solved = 0
    for episode in range(20):
        observation, info = env.reset(seed=episode)
        problem, done = observation, False
        while not done:
            observation, reward, terminated, truncated, info = env.step(scripted_policy(observation, problem))
            done = terminated or truncated
        solved += int(reward == 1.0)
    print(f"solved {solved}/20")


if __name__ == "__main__":
    main()
