"""The task stage: a graph and a cluster compiled for a step (`step`) into the flat arrays the simulators
read (`compiled`, by the compile passes of `passes`), named (`ids`, `named`), cached per task (`cache`),
copied (`copies`), counted (`counter`, `evaluations`), and the op groupings the envs and agents place by
(`groups`, `partition`)."""
