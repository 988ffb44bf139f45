#!/usr/bin/env bash
# Regenerates docs/chain10.gif, the README's animation: the README's main job, then pbf render.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
pbf simulate chain --links 10 --integrator pbad --order 3 --dt 0.05 --duration 10 --adaptive --rtol 5e-6 \
    --out "$tmp/traj.npz" --no-progress
pbf render "$tmp/traj.npz" --out docs/chain10.gif --fps 12 --elev 15 --azim -70
rm -rf "$tmp"
