"""The evaluation stage: who scores a placement (`evaluator`), the budget every agent spends
(`budget`), the agent protocol (`agents`) and placements as files and simple agents (`placements`)."""
