"""A missing optional dependency is named with the extra that installs it, from the Python API too."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from paths import ROOT

from placement_gym.common.extras import MissingExtraError, install_command, require

# Runs a snippet with some modules made unimportable (None in sys.modules makes `import` fail).
_BLOCKED = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
{code}
"""


def _run(blocked: list[str], code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCKED.format(blocked=blocked, code=code)],
                          capture_output=True, text=True, timeout=300)


def test_require_names_the_extra():
    with pytest.raises(MissingExtraError, match=r"plotting needs no_such_module_xyz, which is not installed"):
        require("no_such_module_xyz", "plotting")
    assert require("numpy", "anything").__name__ == "numpy"


@pytest.mark.parametrize(("code", "extra"), [
    ("import gymnasium as gym, placement_gym\n"
     "gym.make('DevicePlacement-v0', graph='cifar10_cnn', cluster='cpu2', reward_mode='real')", "real"),
    ("from placement_gym.real import Executor", "real"),
    ("from placement_gym.cluster import load_cluster\nload_cluster('local')", "real"),
])
def test_the_python_api_names_the_extra_when_torch_is_missing(code, extra):
    done = _run(["torch"], code)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"needs torch, which is not installed: {install_command(extra)}" in last, done.stderr


def test_the_cost_model_env_needs_no_torch():
    done = _run(["torch"], "import gymnasium as gym, placement_gym\n"
                           "env = gym.make('DevicePlacement-v0', graph='cifar10_cnn', cluster='k80x2')\n"
                           "env.reset(seed=0); env.step(env.action_space.sample()); print('ok')")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_install_hint_names_this_checkout_not_the_package_index():
    # The tests run from a checkout (the package is not on the package index): the hint installs it.
    root = ROOT
    assert install_command("baselines") == f"cd {shlex.quote(str(root))} && pip install -e '.[baselines]'"
