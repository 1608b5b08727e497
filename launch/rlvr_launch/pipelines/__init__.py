"""Pipelines: `rlvr pipeline` (multi-stage, resumable) and the generation commands its stages use.

pipeline (the runner), stages (the stage-kind registry and the rl/sft/merge/sample/eval kinds),
distill and thinking_stages (more kinds, registered when imported), generation (prompts -> verified
responses on an hf or vLLM server), vllm_generation (verl's vLLM server), evaluate (`rlvr eval`), sample
(`rlvr sample`). Imports runs, recipes, scoring and data; never jobs or the commands.
"""
