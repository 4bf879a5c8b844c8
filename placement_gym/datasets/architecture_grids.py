"""The grids of the architecture datasets: which models of each family `architectures-v1` and
`architectures-mini-v1` hold (`placement_gym.datasets.architectures` says what each parameter means).

Every family has one graph per grid point. The largest value of a family's size key (its depth, or
the steps of an unrolled LSTM) is held out as the test-sizes split.
"""

from __future__ import annotations

from placement_gym.datasets.dataset import FamilySpec

# architectures-v1: each family's first grid sweeps depth, width (or heads), batch and sequence length or
# image size at the sizes of the papers' and today's models; its second grid is the held-out largest size.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec("resnet", None, (
        {"depth": (8, 14, 20, 32, 44, 56), "widen": (1, 2, 4, 8), "batch": (32, 64, 128, 256)},
        {"depth": (110,), "widen": (1, 2, 4, 8), "batch": (64, 128)},
    ), "depth"),
    FamilySpec("inception", None, (
        {"depth": (1, 2, 3, 4), "width": (50, 75, 100, 150), "batch": (16, 32), "image": (224, 299)},
        {"depth": (6,), "width": (50, 100, 150), "batch": (16, 32), "image": (299,)},
    ), "depth"),
    FamilySpec("efficientnet", None, (
        {"depth": (100, 120, 140, 180, 220), "width": (50, 100, 150, 200), "batch": (16, 64),
         "image": (224,)},
        {"depth": (310,), "width": (100, 200), "batch": (16,), "image": (600,)},
    ), "depth"),
    FamilySpec("convnext", None, (
        {"depth": (1, 2, 3, 4), "width": (32, 64, 96, 128), "batch": (16, 32, 64), "image": (160, 224)},
        {"depth": (9,), "width": (64, 96, 128), "batch": (32, 64), "image": (224,)},
    ), "depth"),
    FamilySpec("unet", None, (
        {"levels": (2, 3, 4, 5), "width": (16, 32, 64), "convs": (2, 3), "batch": (4, 16),
         "image": (128, 256)},
        {"levels": (6,), "width": (16, 32, 64), "convs": (2, 3), "batch": (8,), "image": (256,)},
    ), "levels"),
    FamilySpec("vit", None, (
        {"layers": (2, 4, 6, 8, 12), "hidden": (384, 768, 1024), "heads": (8, 16), "batch": (32, 128),
         "image": (224, 384)},
        {"layers": (24,), "hidden": (1024,), "heads": (16,), "batch": (32, 128), "image": (224, 384)},
    ), "layers"),
    FamilySpec("bert", None, (
        {"layers": (2, 4, 6, 12), "hidden": (256, 768, 1024), "heads": (4, 16), "batch": (16, 64),
         "seq": (128, 512)},
        {"layers": (24,), "hidden": (1024,), "heads": (16,), "batch": (16, 64), "seq": (128, 512)},
    ), "layers"),
    FamilySpec("gpt2", None, (
        {"layers": (2, 4, 6, 12), "hidden": (512, 768, 1024), "heads": (8, 16), "batch": (8, 32),
         "seq": (256, 1024)},
        {"layers": (36,), "hidden": (1280,), "heads": (20,), "batch": (8, 32), "seq": (512, 1024)},
    ), "layers"),
    FamilySpec("llama", None, (
        {"layers": (2, 4, 8, 16), "hidden": (1024, 4096), "heads": (16, 32), "kv_heads": (4, 16),
         "batch": (4,), "seq": (512, 2048)},
        {"layers": (32,), "hidden": (4096,), "heads": (32,), "kv_heads": (8, 32), "batch": (4,),
         "seq": (2048,)},
    ), "layers"),
    FamilySpec("moe", None, (
        {"layers": (2, 4, 8), "hidden": (512, 1024), "heads": (8,), "kv_heads": (2,), "experts": (4, 8, 16),
         "top_k": (1, 2), "batch": (4,), "seq": (512,)},
        {"layers": (32,), "hidden": (1024,), "heads": (8,), "kv_heads": (2,), "experts": (8, 64),
         "top_k": (2,), "batch": (4,), "seq": (512,)},
    ), "layers"),
    FamilySpec("t5", None, (
        {"layers": (2, 4, 6, 8), "hidden": (512, 768), "heads": (8, 16), "batch": (8,), "seq": (128, 512)},
        {"layers": (24,), "hidden": (1024,), "heads": (16,), "batch": (8,), "seq": (512,)},
    ), "layers"),
    FamilySpec("rnnlm", None, (
        {"layers": (1, 2, 4), "hidden": (200, 650, 1500), "steps": (10, 20, 35), "batch": (20,)},
        {"layers": (2, 4), "hidden": (1500,), "steps": (70,), "batch": (20,)},
    ), "steps"),
    FamilySpec("gnmt", None, (
        {"layers": (2, 4), "hidden": (512, 1024), "steps": (5, 10, 20), "batch": (32, 128)},
        {"layers": (2, 8), "hidden": (1024,), "steps": (80,), "batch": (128,)},
    ), "steps"),
    FamilySpec("whisper", None, (
        {"layers": (2, 4, 6, 12), "hidden": (384, 512, 768), "heads": (4, 8), "batch": (4, 16),
         "frames": (1000, 3000)},
        {"layers": (32,), "hidden": (1280,), "heads": (20,), "batch": (4,), "frames": (3000,)},
    ), "layers"),
)

# A mini dataset for tests: one small graph per family, two for three of them (so that the train split
# is not empty). T5 and Whisper are held out, as in architectures-v1.
MINI_FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec("resnet", None, {"depth": (8, 14), "widen": (1,), "batch": (8,)}, "depth"),
    FamilySpec("inception", None, {"depth": (1,), "width": (25,), "batch": (2,), "image": (75,)}, "depth"),
    FamilySpec("efficientnet", None, {"depth": (100,), "width": (25,), "batch": (2,), "image": (64,)},
               "depth"),
    FamilySpec("convnext", None, {"depth": (1,), "width": (16,), "batch": (2,), "image": (64,)}, "depth"),
    FamilySpec("unet", None, {"levels": (2,), "width": (8,), "convs": (2,), "batch": (2,), "image": (32,)},
               "levels"),
    FamilySpec("vit", None, {"layers": (1,), "hidden": (64,), "heads": (2,), "batch": (2,), "image": (32,)},
               "layers"),
    FamilySpec("bert", None, {"layers": (1, 2), "hidden": (64,), "heads": (2,), "batch": (2,), "seq": (16,)},
               "layers"),
    FamilySpec("gpt2", None, {"layers": (1, 2), "hidden": (64,), "heads": (4,), "batch": (2,), "seq": (16,)},
               "layers"),
    FamilySpec("llama", None, {"layers": (2,), "hidden": (64,), "heads": (4,), "kv_heads": (2,),
                               "batch": (2,), "seq": (16,)}, "layers"),
    FamilySpec("moe", None, {"layers": (1,), "hidden": (64,), "heads": (4,), "kv_heads": (2,),
                             "experts": (4,), "top_k": (2,), "batch": (2,), "seq": (8,)}, "layers"),
    FamilySpec("t5", None, {"layers": (1,), "hidden": (64,), "heads": (2,), "batch": (2,), "seq": (16,)},
               "layers"),
    FamilySpec("rnnlm", None, {"layers": (1,), "hidden": (32,), "steps": (3,), "batch": (2,)}, "steps"),
    FamilySpec("gnmt", None, {"layers": (2,), "hidden": (32,), "steps": (3,), "batch": (2,)}, "steps"),
    FamilySpec("whisper", None, {"layers": (1,), "hidden": (64,), "heads": (2,), "batch": (2,),
                                 "frames": (32,)}, "layers"),
)

HELD_OUT: tuple[str, ...] = ("t5", "whisper")
