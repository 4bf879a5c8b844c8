"""`baselines.policies`: the factorised categorical against per-op torch Categoricals, the graph
policy with PPO and MaskablePPO, padding, parameter counts and errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from paths import ROOT

th = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from gymnasium import spaces  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from torch.distributions import Categorical  # noqa: E402

from baselines.policies import (  # noqa: E402
    FactorizedCategoricalDistribution,
    FactorizedPlacementPolicy,
    uniform_multidiscrete,
)
from placement_gym.envs.single_shot import DevicePlacementEnv  # noqa: E402

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"


def _constant_lr(_progress: float) -> float:
    return 3e-4


def _policy(env, **kwargs) -> FactorizedPlacementPolicy:
    return FactorizedPlacementPolicy(env.observation_space, env.action_space, _constant_lr, **kwargs)


def _batch(obs: dict, copies: int = 1) -> dict:
    return {key: th.as_tensor(np.repeat(value[None], copies, axis=0)) for key, value in obs.items()}


# --- the distribution ------------------------------------------------------------------------------

def test_log_prob_and_entropy_equal_sums_over_independent_categoricals():
    gen = th.Generator().manual_seed(0)
    batch, n_ops, n_choices = 3, 5, 4
    logits = th.randn(batch, n_ops, n_choices, generator=gen) * 3
    actions = th.randint(0, n_choices, (batch, n_ops), generator=gen)
    dist = FactorizedCategoricalDistribution(n_ops, n_choices).proba_distribution(logits)
    for b in range(batch):
        per_op = [Categorical(logits=logits[b, i]) for i in range(n_ops)]
        expected_log_prob = sum(float(c.log_prob(actions[b, i])) for i, c in enumerate(per_op))
        expected_entropy = sum(float(c.entropy()) for c in per_op)
        assert float(dist.log_prob(actions)[b]) == pytest.approx(expected_log_prob, rel=1e-5)
        assert float(dist.entropy()[b]) == pytest.approx(expected_entropy, rel=1e-5)
    # SB3's rollout buffer hands actions back as floats; flattened logits are accepted too.
    flat = FactorizedCategoricalDistribution(n_ops, n_choices).proba_distribution(logits.reshape(batch, -1))
    assert th.allclose(flat.log_prob(actions.float()), dist.log_prob(actions))


def test_log_prob_of_hand_computed_case():
    # Two ops, two choices: op 0 has probabilities (1/4, 3/4), op 1 (1/2, 1/2).
    logits = th.log(th.tensor([[[1.0, 3.0], [1.0, 1.0]]]))
    dist = FactorizedCategoricalDistribution(2, 2).proba_distribution(logits)
    assert float(dist.log_prob(th.tensor([[1, 0]]))) == pytest.approx(np.log(0.75 * 0.5), rel=1e-6)
    entropy = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)) + np.log(2)
    assert float(dist.entropy()) == pytest.approx(entropy, rel=1e-6)
    assert dist.mode().tolist() in ([[1, 0]], [[1, 1]])  # op 1 is a tie


def test_sample_shape_range_and_frequencies():
    th.manual_seed(0)
    probs = th.tensor([0.1, 0.2, 0.7])
    dist = FactorizedCategoricalDistribution(6, 3).proba_distribution(th.log(probs).expand(2000, 6, 3))
    sample = dist.sample()
    assert sample.shape == (2000, 6) and sample.dtype == th.int64
    assert int(sample.min()) >= 0 and int(sample.max()) <= 2
    frequencies = th.bincount(sample.flatten(), minlength=3).float() / sample.numel()
    assert th.allclose(frequencies, probs, atol=0.02)
    assert dist.get_actions(deterministic=True).eq(2).all()


def test_masking_restricts_to_allowed_choices():
    gen = th.Generator().manual_seed(1)
    logits = th.randn(4, 3, 5, generator=gen)
    masks = th.rand(4, 3, 5, generator=gen) > 0.4
    masks[..., 0] = True  # at least one allowed choice per op
    dist = FactorizedCategoricalDistribution(3, 5).proba_distribution(logits)
    dist.apply_masking(masks.reshape(4, -1).numpy())  # sb3-contrib passes flat numpy masks
    samples = th.stack([dist.sample() for _ in range(50)])
    assert masks.gather(2, samples.permute(1, 2, 0)).all()
    actions = dist.mode()
    for b in range(4):
        expected_lp = expected_h = 0.0
        for i in range(3):
            allowed = Categorical(logits=logits[b, i][masks[b, i]])
            index = int(masks[b, i, : actions[b, i]].sum())  # position of the action among the allowed
            expected_lp += float(allowed.log_prob(th.tensor(index)))
            expected_h += float(allowed.entropy())
        assert float(dist.log_prob(actions)[b]) == pytest.approx(expected_lp, rel=1e-5)
        assert float(dist.entropy()[b]) == pytest.approx(expected_h, rel=1e-5, abs=1e-6)
    dist.apply_masking(None)
    assert th.allclose(dist.entropy(), Categorical(logits=logits).entropy().sum(1))


# --- action spaces ---------------------------------------------------------------------------------

def test_uniform_multidiscrete_and_clear_errors():
    assert uniform_multidiscrete(spaces.MultiDiscrete([4, 4, 4])) == (3, 4)
    box = spaces.Box(0, 1, (3,))
    with pytest.raises(ValueError, match="same number of choices.*MultiInputPolicy"):
        FactorizedPlacementPolicy(box, spaces.MultiDiscrete([3, 4, 3]), _constant_lr)
    with pytest.raises(ValueError, match="MultiDiscrete action space"):
        FactorizedPlacementPolicy(box, spaces.Discrete(3), _constant_lr)
    with pytest.raises(ValueError, match="1-D"):
        uniform_multidiscrete(spaces.MultiDiscrete([[2, 2], [2, 2]]))


def test_non_graph_observation_falls_back_to_an_mlp():
    policy = FactorizedPlacementPolicy(spaces.Box(-1, 1, (7,)), spaces.MultiDiscrete([3] * 4), _constant_lr)
    actions, values, log_prob = policy(th.zeros(2, 7))
    assert actions.shape == (2, 4) and values.shape == (2, 1) and log_prob.shape == (2,)
    assert not hasattr(policy, "graph_net")


# --- the graph policy ------------------------------------------------------------------------------

def test_ppo_trains_and_predicts_a_valid_placement():
    """PPO trains with the policy and predicts valid placements. 128 steps teach it nothing that random
    placements would not match: that PPO with this policy learns is test_learned_sb3.py's claim
    (sb3-ppo against random search at the same budget)."""
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    model = PPO(FactorizedPlacementPolicy, env, n_steps=64, batch_size=32, n_epochs=2, seed=0)
    model.learn(128)
    obs, _ = env.reset(seed=0)
    for deterministic in (True, False):
        action, _ = model.predict(obs, deterministic=deterministic)
        assert action.shape == (env.task.n_forward,)
        assert env.action_space.contains(action.astype(env.action_space.dtype))
        env.reset()
        env.step(action)


def test_save_and_load_keep_the_policy(tmp_path):
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    model = PPO(FactorizedPlacementPolicy, env, n_steps=32, batch_size=32, n_epochs=1, seed=0,
                policy_kwargs={"hidden_dim": 16, "message_passing_rounds": 1})
    model.learn(32)
    model.save(tmp_path / "model")
    loaded = PPO.load(tmp_path / "model")
    assert loaded.policy.hidden_dim == 16 and loaded.policy.message_passing_rounds == 1
    obs, _ = env.reset()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0],
                                  loaded.predict(obs, deterministic=True)[0])


def test_parameter_count_does_not_depend_on_the_graph():
    small = _policy(DevicePlacementEnv(graph="cifar10_cnn", cluster="k80x4"))
    large = _policy(DevicePlacementEnv(graph="resnet50", cluster="k80x4"))
    assert small.n_ops != large.n_ops
    count = [sum(p.numel() for p in policy.parameters()) for policy in (small, large)]
    assert count[0] == count[1]


def test_padding_changes_nothing():
    plain_env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    obs, _ = plain_env.reset()
    n_nodes, n_edges = len(obs["node_mask"]), len(obs["edge_mask"])
    padded_env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER, max_ops=n_nodes + 9, max_edges=n_edges + 4)
    th.manual_seed(0)
    plain, padded = _policy(plain_env), _policy(padded_env)
    padded.load_state_dict(plain.state_dict())  # same parameters: shapes do not depend on padding
    padded_obs, _ = padded_env.reset()
    rng = np.random.default_rng(0)
    # Garbage in the padded rows must not leak into the real nodes' logits or the value.
    padded_obs["node_features"][n_nodes:] = rng.random((9, padded_obs["node_features"].shape[1]))
    padded_obs["edge_features"][n_edges:] = rng.random((4, 1))
    padded_obs["edge_index"][:, n_edges:] = rng.integers(0, n_nodes + 9, size=(2, 4))
    with th.no_grad():
        logits_a, value_a = plain.graph_net(_batch(obs))
        logits_b, value_b = padded.graph_net(_batch(padded_obs))
    assert th.allclose(logits_a, logits_b, atol=1e-6) and th.allclose(value_a, value_b, atol=1e-6)


def test_a_batch_of_equal_observations_matches_row_by_row_encoding():
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    policy = _policy(env)
    obs, _ = env.reset()
    single, batch = _batch(obs), _batch(obs, copies=3)
    different = _batch(obs, copies=3)
    different["placement"][1, :, 0] = 1.0  # row 1 differs: the batch is encoded row by row
    with th.no_grad():
        logits_1, values_1 = policy.graph_net(single)
        logits_3, values_3 = policy.graph_net(batch)
        logits_d, _ = policy.graph_net(different)
        logits_row, _ = policy.graph_net({key: value[1:2] for key, value in different.items()})
    assert logits_3.shape == (3, env.task.n_forward, env.task.n_devices)
    assert th.allclose(logits_3, logits_1.expand(3, -1, -1)) and th.allclose(values_3, values_1.expand(3, 1))
    assert th.allclose(logits_d[0], logits_1[0], atol=1e-6)
    assert th.allclose(logits_d[1], logits_row[0], atol=1e-6)
    assert not th.allclose(logits_d[1], logits_1[0])  # the placement entry is read


def test_a_repeated_call_without_gradients_is_not_encoded_again_yet_follows_weights_and_observation(
        monkeypatch):
    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    net = _policy(env).graph_net
    obs = _batch(env.reset()[0])
    encodings = []
    encode = net._encode
    monkeypatch.setattr(net, "_encode", lambda o: encodings.append(1) or encode(o))

    def with_gradients(o):
        logits, values = net(o)
        return logits.detach(), values.detach()

    reference = with_gradients(obs)
    with th.no_grad():
        first = net(obs)
        first[0].add_(5.0)  # what a caller does to its outputs must not reach the kept copy
        second = net(obs)
    assert len(encodings) == 2  # one with gradients, one without; the repeat was not encoded
    assert th.equal(second[0], reference[0]) and th.equal(second[1], reference[1])

    with th.no_grad():
        net.policy_out.bias.add_(0.5)  # an optimiser step between two rollouts
        moved = net(obs)
    assert th.equal(moved[0], with_gradients(obs)[0]) and not th.allclose(moved[0], reference[0])

    other = {key: value.clone() for key, value in obs.items()}
    other["placement"][0, :, 0] = 1.0
    with th.no_grad():
        changed = net(other)
    assert th.equal(changed[0], with_gradients(other)[0]) and not th.allclose(changed[0], moved[0])
    assert len(encodings) == 6  # each new weight or observation is encoded


def test_maskable_ppo_with_the_factorised_policy():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO

    from baselines.policies import MaskableFactorizedPlacementPolicy

    env = DevicePlacementEnv(graph=GRAPH, cluster=CLUSTER)
    model = MaskablePPO(MaskableFactorizedPlacementPolicy, env, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    obs, _ = env.reset()
    action, _ = model.predict(obs, action_masks=env.action_masks())
    assert env.action_space.contains(action.astype(env.action_space.dtype))
    assert env.action_masks()[np.arange(len(action)), action].all()


def test_import_baselines_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import baselines\n"
        "try:\n"
        "    baselines.FactorizedPlacementPolicy\n"
        "except ImportError:\n"
        "    print('lazy')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "lazy"
