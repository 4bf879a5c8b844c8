"""The scripts that made the leaderboard's baseline entries (``leaderboard/submissions/``), one module
per kind of agent, each run from the repository root with ``python -m``:

- `baselines.leaderboard_fill.classic`: the heuristic, search and exact agents, one submission each;
- `baselines.leaderboard_fill.learned`: the learned agents, three seeds, resumable (it also made the
  small entry CI re-runs, ``leaderboard/reproducible/v1-pg-200-seed0.json``, and, with ``--from-suite``,
  any registry agent's entries of a later suite from an earlier suite's files);
- `baselines.leaderboard_fill.generalisation`: the GNN placers on a suite's generalisation split;
- `baselines.leaderboard_fill.generalisation_v2`: the baselines on a generalisation suite drawn from a
  dataset.

A suite file names the scripts that fill its suite (its ``fill``, by module name); each script runs on
those suites only, by default on the current one among them (`placement_gym.leaderboard.registry`).
Each runs an agent through the leaderboard harness (`placement_gym.leaderboard.evaluate`) and writes
its submission; ``placement-gym leaderboard validate --rerun`` runs a seeded entry again through
`baselines.registry.harness_agent`, the agent the classic and learned fills run.
"""
