"""The task stage: a graph and a cluster compiled for a step (`step`) into the flat arrays the simulators
read (`compiled`), named (`ids`, `named`), cached per task (`cache`), counted (`counter`), and the op
groupings the envs and agents place by (`groups`, `partition`)."""
