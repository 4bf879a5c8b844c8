"""The passes that compile a step, each one job, in the order `placement_gym.task.compiled.make_task`
runs them on a `StepGraph` (the step's ops, tensors and reads, `step_graph`):

1. `forward` (inference: the graph's own ops) or `backward` (a training step: backward ops, gradients,
   saved activations and update ops);
2. `precision`: a half-precision step's bytes and static memory;
3. `recompute`: activation recomputation, segment by segment;
4. `microbatches`: the copies of a pipelined step and its fill-drain order;

then `durations` times every op on every device. The layouts the passes make are described in the
module docstring of `placement_gym.task.compiled`."""
