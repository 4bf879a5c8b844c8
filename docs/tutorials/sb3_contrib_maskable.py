"""sb3-contrib MaskablePPO on the refine env: the env's action_masks() keeps devices that fit."""

import gymnasium as gym
from sb3_contrib import MaskablePPO

import placement_gym  # noqa: F401 - registers the environments


def main(timesteps: int = 4096, seed: int = 0) -> float:
    # Placeto's MDP: start from a random placement, move one node per step, reward = improvement.
    env = gym.make("DevicePlacementRefine-v0", graph="cifar10_cnn", cluster="k80x4")
    model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, seed=seed, verbose=0)
    model.learn(total_timesteps=timesteps)  # MaskablePPO calls env.action_masks() at every step

    obs, info = env.reset(seed=seed)
    start = float(info["runtime"])  # the random initial placement, simulated at reset
    done = False
    while not done:
        masks = env.unwrapped.action_masks()  # bool (n_devices,): devices whose memory holds the node
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    print(f"refined {start * 1e3:.2f} ms -> {info['runtime'] * 1e3:.2f} ms; "
          f"best single device {info['best_single_runtime'] * 1e3:.2f} ms")
    return float(info["runtime"])


if __name__ == "__main__":
    main()
