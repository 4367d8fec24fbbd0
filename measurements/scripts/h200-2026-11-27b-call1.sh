#!/usr/bin/env bash
# Device call 1 of 2026-11-27 (second session): the head to head replayed live, rank-serially, on one H200. The
# wikipedia and ChatQA2 line-ups of Skrull's case study with HBP, Hydraulis, WLB-LLM and FlexSP beside DeepSpeed,
# Skrull and RR, then HBP's main setting at 8 GPUs on the LLaMA3.1-8B shape with 8 layers. 1 warm-up and 3 (wikipedia)
# or 2 timed runs per distinct job, to fit one call. One archive ($OUT/call1.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27b-call1.sh BINARY OUTDIR
# The shared prelude moved to live_calls.sh after the run; the commands are the ones that ran.
set -uo pipefail
source "$(dirname "$0")/live_calls.sh" "$1" "$2" call1.tgz
live qwen2.5-0.5b-wikipedia-headtohead-dp1-cp8-h200 90 3
live qwen2.5-0.5b-chatqa2-headtohead-dp1-cp8-h200 300 2
# It ran on the file naming LLaMA3.1-8B; the committed file holds the 8-layer model, where --layers 8 changes nothing.
live llama3.1-8b-tulu3-longcite-headtohead-dp1-cp8-h200 120 2 --layers 8
exit 0
