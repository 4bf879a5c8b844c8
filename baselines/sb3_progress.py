"""A stable-baselines3 callback that reports training progress on stderr (stdout keeps a script's
results): a line at least every 3 s, a bar on a terminal (`placement_gym.common.progress`)."""

from __future__ import annotations

from stable_baselines3.common.callbacks import BaseCallback

from placement_gym.common.progress import Progress


class TrainingProgress(BaseCallback):
    """``model.learn(total_timesteps=total, callback=TrainingProgress(total))``: the time steps done of
    ``total``."""

    def __init__(self, total: int):
        super().__init__()
        self.total = total
        self.progress: Progress | None = None

    def _on_training_start(self) -> None:
        self.progress = Progress()

    def _on_step(self) -> bool:
        self.progress("training", self.num_timesteps, self.total)
        return True

    def _on_training_end(self) -> None:
        self.progress.close()
