"""The entry points the env ids are registered with (`placement_gym.envs.ENV_IDS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym


def gym_entry_point(env_class: type[gym.Env]) -> Callable[..., gym.Env]:
    """The function that builds ``env_class`` from keyword arguments: the entry point its id is
    registered with. A function, not the class, because `gym.make` reads a class's render modes
    and answers ``render_mode="human"`` (which no env here has) by building the env in
    ``"rgb_array"`` mode inside gymnasium's pygame window; given a function, it passes ``"human"`` on
    and the env refuses it, naming the modes it has. Every keyword is the env's own, ``dataset=``,
    ``clusters=`` and ``task_source=`` included (the env draws its tasks itself:
    `placement_gym.envs.sources`)."""

    def make_env(**kwargs: Any) -> gym.Env:
        return env_class(**kwargs)

    make_env.__module__ = env_class.__module__
    make_env.__qualname__ = make_env.__name__ = "make_env"
    make_env.__doc__ = f"A `{env_class.__name__}` of these keyword arguments (its id's entry point)."
    return make_env
