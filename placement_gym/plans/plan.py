"""`Plan`: how a model's training step is split over a mesh, one frozen value, and `plan_problems`, the
one-line reasons a plan cannot run a model on a mesh.

Ranks are laid out as Megatron-LM lays them: tensor-parallel ranks innermost (neighbours in a node),
then context-parallel, then data-parallel (expert-parallel groups inside the data-parallel group), then
pipeline stages outermost. Global batch = data-parallel degree x micro-batch size x micro-batches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from placement_gym.plans.mesh import Mesh
from placement_gym.plans.models import TransformerModel

SCHEDULES = ("1f1b", "gpipe", "interleaved")
RECOMPUTE = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp16", "fp8")
ZERO_STAGES = (0, 1, 2, 3)
MAX_DEGREE = 65_536
# Stage-micro-batch units a plan's schedule may simulate (two arrays of units x 8 bytes): 30x GPT-3
# 175B's on 512 GPUs with 64 micro-batches and 6 virtual stages, far past any published layout.
MAX_UNITS = 200_000


@dataclass(frozen=True)
class Plan:
    """A parallel training plan.

    ``tp``, ``pp``, ``dp``, ``cp`` (context: the sequence split over ranks for attention), ``ep``
    (experts split over ranks of the data-parallel group): degrees. ``vp``: virtual stages a device
    holds (interleaved 1F1B). ``global_batch`` sequences a step of ``microbatch_size`` sequences a
    micro-batch. ``schedule``: 1f1b, gpipe or interleaved (vp > 1). ``sequence_parallel``: norms,
    dropout and residuals split over the tensor group, its all-reduces as reduce-scatter + all-gather
    (Korthikanti et al. 2022). ``zero``: ZeRO stage over the data-parallel group (1: optimizer state, 2:
    and gradients, 3: and parameters). ``recompute``: none, selective (the attention core, Korthikanti
    et al.) or full (each layer from its input); ``recompute_layers``: with full recomputation, only the
    first this many layers of each virtual stage recompute, the others keep their activations
    (Megatron-LM's block method; 0: every layer). ``precision``: bf16, fp16 or fp8 matrix products, fp32
    master weights and optimizer state. ``fused_attention``: FlashAttention (scores never stored) or
    the scores materialised. ``stage_layers``: layers of each virtual stage in order (empty: even).
    ``stage_tp``: each pipeline stage's own tensor degree (empty: ``tp`` everywhere); a stage splits its
    ``tp x dp`` GPUs into that tensor degree and the data degree it leaves, its ranks taking an equal
    share of the ``dp x microbatch_size`` sequences of every micro-batch (`Plan.stage_views`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    global_batch: int = 1
    microbatch_size: int = 1
    schedule: str = "1f1b"
    vp: int = 1
    ep: int = 1
    cp: int = 1
    sequence_parallel: bool = False
    zero: int = 0
    recompute: str = "none"
    recompute_layers: int = 0
    precision: str = "bf16"
    fused_attention: bool = True
    stage_layers: tuple[int, ...] = ()
    stage_tp: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for key in ("tp", "pp", "dp", "vp", "ep", "cp", "global_batch", "microbatch_size"):
            value, limit = getattr(self, key), MAX_DEGREE * (64 if key == "global_batch" else 1)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
                raise ValueError(f"plan {key} must be an integer from 1 to {limit:,}, got {value!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"plan schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"plan recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"plan precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        layers = self.recompute_layers
        if not isinstance(layers, int) or isinstance(layers, bool) or not 0 <= layers <= MAX_DEGREE:
            raise ValueError(f"plan recompute_layers must be an integer from 0 to {MAX_DEGREE:,}, got "
                             f"{self.recompute_layers!r}")
        if self.zero not in ZERO_STAGES or isinstance(self.zero, bool):
            raise ValueError(f"plan zero must be 0, 1, 2 or 3, got {self.zero!r}")
        object.__setattr__(self, "stage_layers", tuple(self.stage_layers))
        if any(not isinstance(n, int) or n < 0 for n in self.stage_layers):
            raise ValueError("plan stage_layers must be counts of layers (integers >= 0)")
        object.__setattr__(self, "stage_tp", tuple(self.stage_tp))
        if any(not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_DEGREE
               for n in self.stage_tp):
            raise ValueError(f"plan stage_tp must be tensor degrees (integers from 1 to {MAX_DEGREE:,})")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def microbatches(self) -> int:
        """Micro-batches a pipeline runs per step (0 where the batch does not divide)."""
        per_replica, left = divmod(self.global_batch, self.dp * self.microbatch_size)
        return 0 if left else per_replica

    def stage_views(self) -> tuple[Plan, ...]:
        """Each pipeline stage's plan, as a plan of one tensor degree: ``stage_tp[s]`` with the data
        degree that leaves of the stage's ``tp x dp`` GPUs and the micro-batch share of each of its
        ranks (sequence parallelism only where the stage's degree is above 1). Without ``stage_tp``,
        the plan itself for every stage."""
        if not self.stage_tp:
            return (self,) * self.pp
        sequences = self.dp * self.microbatch_size  # of one micro-batch
        views = []
        for tp in self.stage_tp:
            dp = max(self.tp * self.dp // tp, 1)
            views.append(replace(self, tp=tp, dp=dp, microbatch_size=max(sequences // dp, 1), stage_tp=(),
                                 sequence_parallel=self.sequence_parallel and tp > 1))
        return tuple(views)

    @property
    def virtual_stages(self) -> int:
        return self.pp * self.vp

    def layers_of_stages(self, layers: int) -> tuple[int, ...]:
        """Layers of each virtual stage (stage k of device k mod pp, chunk k // pp)."""
        if self.stage_layers:
            return self.stage_layers
        share, left = divmod(layers, self.virtual_stages)
        return tuple(share + (1 if k < left else 0) for k in range(self.virtual_stages))

    def as_dict(self) -> dict:
        return asdict(self)

    def suffix(self) -> str:
        """The plan as a task id's last part: its degrees, batch and options, each a token (defaults
        left out), ``-`` between them: ``tp4-pp4-vp5-dp4-gb128-sp-zero1-fp8``. `Plan.from_suffix` reads
        it back to the same plan."""
        tokens = [f"tp{self.tp}", f"pp{self.pp}"] + [f"vp{self.vp}"] * (self.vp > 1)
        tokens += [f"dp{self.dp}"] + [f"ep{self.ep}"] * (self.ep > 1) + [f"cp{self.cp}"] * (self.cp > 1)
        tokens += [f"gb{self.global_batch}"] + [f"mbs{self.microbatch_size}"] * (self.microbatch_size > 1)
        usual = "interleaved" if self.vp > 1 else "1f1b"
        tokens += [self.schedule] * (self.schedule != usual) + ["sp"] * self.sequence_parallel
        tokens += [f"zero{self.zero}"] * (self.zero > 0)
        tokens += [f"rc{self.recompute}"] * (self.recompute != "none")
        tokens += [f"rcl{self.recompute_layers}"] * (self.recompute_layers > 0)
        tokens += [self.precision] * (self.precision != "bf16")
        tokens += ["materialised"] * (not self.fused_attention)
        if self.stage_layers:
            tokens.append("layers" + ".".join(str(n) for n in self.stage_layers))
        if self.stage_tp:
            tokens.append("stp" + ".".join(str(n) for n in self.stage_tp))
        return "-".join(tokens)

    @classmethod
    def from_suffix(cls, text: str) -> Plan:
        """The plan `Plan.suffix` wrote; a ValueError names a token it does not know."""
        if not isinstance(text, str) or len(text) > 2000:
            raise ValueError("a plan suffix is a string of at most 2,000 characters")
        fields: dict = {}
        for token in text.split("-"):
            key, value = _plan_token(token)
            if key in fields:
                raise ValueError(f"plan token {token!r} repeats {key}")
            fields[key] = value
        fields.setdefault("schedule", "interleaved" if fields.get("vp", 1) > 1 else "1f1b")
        return cls(**fields)

    def describe(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}", f"DP{self.dp}"]
        parts += (
            [f"VP{self.vp}"] * (self.vp > 1)
            + [f"CP{self.cp}"] * (self.cp > 1)
            + [f"EP{self.ep}"] * (self.ep > 1)
        )
        extras = ["SP"] * self.sequence_parallel + [f"ZeRO-{self.zero}"] * (self.zero > 0)
        layers = f" ({self.recompute_layers} layers a stage)" if self.recompute_layers else ""
        extras += [f"recompute {self.recompute}{layers}"] * (self.recompute != "none")
        attention = "flash" if self.fused_attention else "materialised attention"
        if self.stage_tp:
            extras.append("stage TP " + "/".join(str(t) for t in self.stage_tp))
        return (
            f"{' x '.join(parts)} {self.schedule}, global batch {self.global_batch} "
            f"({self.microbatches} x {self.microbatch_size}), {self.precision}, {attention}"
            + "".join(f", {e}" for e in extras)
        )


_NUMBERS = {"tp": "tp", "pp": "pp", "vp": "vp", "dp": "dp", "ep": "ep", "cp": "cp", "gb": "global_batch",
            "mbs": "microbatch_size", "zero": "zero", "rcl": "recompute_layers"}
_FLAGS = {**{schedule: ("schedule", schedule) for schedule in SCHEDULES}, "sp": ("sequence_parallel", True),
          "fp16": ("precision", "fp16"), "fp8": ("precision", "fp8"),
          "materialised": ("fused_attention", False), "rcselective": ("recompute", "selective"),
          "rcfull": ("recompute", "full")}


def _plan_token(token: str) -> tuple[str, object]:
    """The (field, value) one token of `Plan.suffix` sets."""
    if token in _FLAGS:
        return _FLAGS[token]
    head = token.rstrip("0123456789")
    if head in _NUMBERS and token[len(head):].isdigit():
        return _NUMBERS[head], int(token[len(head):])
    for prefix, key in (("layers", "stage_layers"), ("stp", "stage_tp")):
        counts = token.removeprefix(prefix).split(".")
        if token.startswith(prefix) and all(count.isdigit() for count in counts):
            return key, tuple(int(count) for count in counts)
    raise ValueError(f"plan token {token!r}: not one of tp/pp/vp/dp/ep/cp/gb/mbs/zero/rcl<N>, "
                     f"{'/'.join(_FLAGS)}, layers<N>.<N>..., stp<N>.<N>...")


def plan_problems(plan: Plan, model: TransformerModel, mesh: Mesh) -> list[str]:
    """Why ``plan`` cannot train ``model`` on ``mesh``, one line each (empty: it can, memory aside)."""
    problems = []
    if plan.gpus != mesh.gpus:
        problems.append(f"tp x pp x dp x cp = {plan.gpus} GPUs, the mesh has {mesh.gpus}")
    kv = model.key_value_heads
    for tp in sorted(set(plan.stage_tp or (plan.tp,))):
        if model.heads % tp:
            problems.append(f"tp {tp} does not divide the {model.heads} attention heads")
        if kv % tp and tp % kv:
            problems.append(f"tp {tp} and the {kv} key/value heads: neither divides the other")
        if model.ffn_width % tp:
            problems.append(f"tp {tp} does not divide the MLP width {model.ffn_width}")
    problems += _stage_tp_problems(plan)
    units = plan.virtual_stages * plan.microbatches
    if units > MAX_UNITS:
        problems.append(f"pp x vp x micro-batches = {units:,} pipeline units; at most {MAX_UNITS:,} are "
                        "simulated")
    if plan.microbatches == 0:
        problems.append(
            f"global batch {plan.global_batch} is not a multiple of dp x micro-batch size "
            f"= {plan.dp * plan.microbatch_size}"
        )
    stages = plan.layers_of_stages(model.layers)
    if len(stages) != plan.virtual_stages or sum(stages) != model.layers:
        problems.append(
            f"stage_layers must give {plan.virtual_stages} stages (pp x vp) of {model.layers} layers in all"
        )
    elif not plan.stage_layers and model.layers % plan.virtual_stages:
        problems.append(
            f"pp x vp = {plan.virtual_stages} does not divide the {model.layers} layers "
            "(give stage_layers for an uneven split)"
        )
    if plan.vp > 1 and plan.schedule != "interleaved":
        problems.append(f"vp {plan.vp} needs the interleaved schedule")
    if plan.schedule == "interleaved":
        if plan.vp < 2 or plan.pp < 2:
            problems.append("the interleaved schedule needs pp >= 2 and vp >= 2")
        elif plan.microbatches and plan.microbatches % plan.pp:
            problems.append(
                f"the interleaved schedule needs micro-batches ({plan.microbatches}) a "
                f"multiple of pp ({plan.pp})"
            )
    if plan.ep > 1:
        if model.family != "moe":
            problems.append(f"ep {plan.ep}: model {model.name or model.family} has no experts")
        elif model.experts % plan.ep:
            problems.append(f"ep {plan.ep} does not divide the {model.experts} experts")
        for dp in sorted({view.dp for view in plan.stage_views()}):
            if dp % plan.ep:
                problems.append(f"ep {plan.ep} must divide dp {dp} (expert groups lie in the data-parallel "
                                "group)")
    if model.seq % plan.cp or (plan.cp > 1 and (model.seq // plan.cp) % 2):
        problems.append(f"cp {plan.cp} must split the sequence {model.seq} into even chunks")
    if plan.recompute_layers and plan.recompute != "full":
        problems.append("recompute_layers is for full recomputation (recompute full)")
    if plan.sequence_parallel and max(plan.stage_tp or (plan.tp,)) == 1:
        problems.append("sequence parallelism splits over the tensor group: it needs tp >= 2")
    if plan.precision not in mesh.gpu.peak:
        # on a mixed mesh, the GPU model that lacks it
        gpu = next((g for g in mesh.gpu.members if plan.precision not in g.peak), mesh.gpu)
        problems.append(f"{gpu.model} has no {plan.precision} tensor cores (it has {', '.join(gpu.peak)})")
    return problems


def _stage_tp_problems(plan: Plan) -> list[str]:
    """Why ``plan.stage_tp`` cannot split its stages: a degree per stage, each dividing a stage's
    ``tp x dp`` GPUs, each data degree left dividing a micro-batch's sequences."""
    if not plan.stage_tp:
        return []
    if len(plan.stage_tp) != plan.pp:
        return [f"stage_tp gives {len(plan.stage_tp)} tensor degrees for {plan.pp} pipeline stages"]
    gpus, sequences = plan.tp * plan.dp, plan.dp * plan.microbatch_size
    problems = []
    for tp in sorted(set(plan.stage_tp)):
        if gpus % tp:
            problems.append(f"stage_tp {tp} does not divide a stage's tp x dp = {gpus} GPUs")
        elif sequences % (gpus // tp):
            problems.append(f"stage_tp {tp} leaves dp {gpus // tp}, which does not divide a micro-batch's "
                            f"{sequences} sequences (dp x micro-batch size)")
    return problems
