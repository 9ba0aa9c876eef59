#!/usr/bin/env bash
# GPU acceptance check for the vllm rollout engine (issue 7).
#
# STATUS: written against vLLM 0.30-0.32's documented API (LLM with the external launcher,
# logprobs_mode, sleep/wake_up, collective_rpc("reload_weights", weights_iterator=...),
# prompt_logprobs) but NOT YET RUN ON A GPU. Until a run's figures are recorded in the
# project notes, treat the vllm engine as unverified.
#
# What it checks, on one CUDA GPU with vLLM installed (pip install -e '.[vllm,dev]'):
#   1. weights really sync: vLLM's log-probs of a fixed sequence match the trainer's before
#      and after an update, and move when the weights move (tests/rollout/test_vllm.py, gpu);
#   2. rollout throughput (tokens/s) and weight-sync time of the engine on its own;
#   3. a short GRPO run through `rlrun train` with vLLM, printing each step's time.
#
# Model: RLRUN_GPU_MODEL (a hub id in the local HF cache or a local HF directory); default
# Qwen/Qwen2.5-0.5B-Instruct when it is cached, else the embedded rlrun:tiny-base.
# Usage: bash scripts/gpu_check.sh        (about 5 minutes with the 0.5B model)
set -euo pipefail
cd "$(dirname "$0")/.."

python - <<'EOF' || { echo "gpu_check: needs a CUDA GPU and vLLM (pip install -e '.[vllm,dev]')"; exit 2; }
import torch, vllm
assert torch.cuda.is_available(), "no CUDA device"
print(f"torch {torch.__version__}, vLLM {vllm.__version__}, {torch.cuda.get_device_name()}")
EOF

if [[ -z "${RLRUN_GPU_MODEL:-}" ]]; then
  RLRUN_GPU_MODEL=$(python - <<'EOF'
from huggingface_hub import try_to_load_from_cache
cached = try_to_load_from_cache("Qwen/Qwen2.5-0.5B-Instruct", "config.json")
print("Qwen/Qwen2.5-0.5B-Instruct" if isinstance(cached, str) else "rlrun:tiny-base")
EOF
)
fi
export RLRUN_GPU_MODEL HF_HUB_OFFLINE=1
echo "== model: $RLRUN_GPU_MODEL"

echo "== 1. weight sync (pytest -m gpu)"
python -m pytest -q -m gpu tests/rollout/test_vllm.py -p no:cacheprovider

echo "== 2. rollout throughput and sync time"
python - <<'EOF'
import os, time, torch
from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.vllm import VLLMRolloutEngine
from rlrun.training.models import load_causal_lm, load_tokenizer

path = os.environ["RLRUN_GPU_MODEL"]
model, tokenizer = load_causal_lm(path, "bfloat16").cuda(), load_tokenizer(path)
engine = VLLMRolloutEngine(model, tokenizer, max_batch_samples=512, vllm={"gpu_memory_utilization": 0.4})
prompts = [tokenizer(f"Question {i}: what is {i} + {2 * i}? Think step by step.")["input_ids"] for i in range(64)]
fixed = SamplingParams(n=8, max_tokens=256, min_tokens=256, temperature=1.0, seed=0)  # 131,072 tokens
engine.generate(prompts[:4], SamplingParams(n=2, max_tokens=16, seed=0))  # warm-up
torch.cuda.synchronize(); start = time.perf_counter()
batch = engine.generate(prompts, fixed)
torch.cuda.synchronize(); seconds = time.perf_counter() - start
tokens = int(batch.response_mask.sum())
print(f"rollout: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:,.0f} tokens/s")
torch.cuda.synchronize(); start = time.perf_counter()
engine.sync_weights(model)
torch.cuda.synchronize()
print(f"weight sync: {time.perf_counter() - start:.3f} s")
EOF

echo "== 3. short GRPO with vLLM (python -m rlrun train = rlrun train)"
out=$(mktemp -d)
python -m rlrun train recipes/gsm8k/grpo_qwen2.5-0.5b.yaml \
  "model.path=$RLRUN_GPU_MODEL" data.apply_chat_template=auto \
  trainer.total_steps=4 trainer.prompts_per_step=16 rollout.max_response_tokens=256 \
  actor.mini_batch_samples=64 actor.micro_batch_samples=8 \
  trainer.eval.every_steps=0 trainer.eval.prompts=16 trainer.checkpoint.every_steps=0 \
  "trainer.output_dir=$out" logging.wandb.enabled=false
python - "$out" <<'EOF'
import json, sys
from pathlib import Path
(metrics,) = Path(sys.argv[1]).glob("*/metrics.jsonl")
rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
previous = 0.0
for row in (r for r in rows if "step" in r and "wall_time_s" in r):
    print(f"step {row['step']}: {row['wall_time_s'] - previous:.1f} s")
    previous = row["wall_time_s"]
EOF
echo "gpu_check: passed"
