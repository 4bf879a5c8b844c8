"""stable-baselines3 PPO with its stock MultiInputPolicy on the dict observation."""

import gymnasium as gym
from stable_baselines3 import PPO

import placement_gym  # noqa: F401 - registers the environments


def main(timesteps: int = 4096, seed: int = 0) -> float:
    # Spotlight's MDP: one node per step, Discrete(n_devices) actions, reward at the last stage.
    env = gym.make("DevicePlacementStaged-v0", graph="cifar10_cnn", cluster="k80x2")
    model = PPO("MultiInputPolicy", env, gamma=1.0, n_steps=256, batch_size=64, seed=seed, verbose=0)
    model.learn(total_timesteps=timesteps)

    obs, info = env.reset(seed=seed)  # one greedy episode of the trained policy
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    print(f"policy: {info['runtime'] * 1e3:.2f} ms, feasible {bool(info['feasible'])}; "
          f"best single device {info['best_single_runtime'] * 1e3:.2f} ms")
    return float(info["runtime"])


if __name__ == "__main__":
    main()
