#!/usr/bin/env bash
# Device call 2 of 2026-11-27 (second session): call 1's runs repeated where lcsim ranked two policies otherwise than
# the hardware, to see whether the measured gaps repeat: the wikipedia head to head whole (1 warm-up, 3 timed runs
# per job, as call 1), and ISF and WLB-LLM on the 8B shape (3 timed runs, 2 in call 1; the committed scenario holds
# the 8-layer model). One archive ($OUT/call2.tgz), rewritten after each step.
# Usage: measurements/scripts/h200-2026-11-27b-call2.sh BINARY OUTDIR
# The shared prelude moved to live_calls.sh after the run; the commands are the ones that ran.
set -uo pipefail
source "$(dirname "$0")/live_calls.sh" "$1" "$2" call2.tgz
live qwen2.5-0.5b-wikipedia-headtohead-dp1-cp8-h200 60 3
live llama3.1-8b-tulu3-longcite-headtohead-dp1-cp8-h200 40 3 --policy wlb-llm
exit 0
