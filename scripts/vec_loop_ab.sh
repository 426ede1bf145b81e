#!/usr/bin/env bash
# A/B of envs/shoal_vec.h's vector loop, outside Python: CartPole's C loop
# (4,096 envs, 3,000 steps, best of 5 windows) built against the vector loop
# of git revision OLD and against the working tree's, run alternately.
# FILE picks another header to take from OLD (the others are the working
# tree's): cartpole.h, for the env's own step.
#
#     bash scripts/vec_loop_ab.sh OLD [ROUNDS] [FILE]   # e.g. 9e35040 6
#     bash scripts/vec_loop_ab.sh a5503c0 6 envs/cartpole/cartpole.h
#
# Both builds take setup.py's C flags. Each line: which build, its rate,
# and the episodes it ended (equal when both loops do the same work).
set -euo pipefail
old=${1:?usage: vec_loop_ab.sh OLD_REVISION [ROUNDS]}
rounds=${2:-6}
file=${3:-envs/shoal_vec.h}
case $file in
    envs/shoal_vec.h|envs/shoal_env.h|envs/cartpole/cartpole.h) ;;
    *) echo "FILE must be envs/shoal_vec.h, envs/shoal_env.h or envs/cartpole/cartpole.h" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for side in old new; do
    mkdir -p "$work/$side/cartpole"
    cp "$root/envs/shoal_env.h" "$root/envs/shoal_vec.h" "$work/$side/"
    cp "$root/envs/cartpole/cartpole.h" "$work/$side/cartpole/"
done
git -C "$root" show "$old:$file" > "$work/old/${file#envs/}"
cat > "$work/loop.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "cartpole/cartpole.h"
#define SHOAL_VEC_ENV cartpole
#include "shoal_vec.h"

int main(void) {
    const int64_t n = 4096;
    const int steps = 3000;
    cartpole_env* envs = calloc(n, sizeof(cartpole_env));
    shoal_episode* eps = calloc(n, sizeof(shoal_episode));
    uint8_t* requests = malloc(n);
    uint64_t* seeds = malloc(n * sizeof(uint64_t));
    float* obs = malloc(n * 4 * sizeof(float));
    float* rew = malloc(n * sizeof(float));
    uint8_t *term = malloc(n), *trunc = malloc(n), *mask = malloc(n);
    int32_t* act = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) { requests[i] = SHOAL_RESEED; seeds[i] = (uint64_t)i; }
    cartpole_vec_reset(envs, eps, n, requests, seeds, obs, rew, term, trunc, mask);
    shoal_rng rng;
    shoal_rng_seed(&rng, 1);
    double best = 0.0;
    for (int window = 0; window < 5; window++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int t = 0; t < steps; t++) {
            for (int64_t i = 0; i < n; i++) act[i] = (int32_t)(shoal_rng_u32(&rng) & 1);
            cartpole_vec_step(envs, eps, n, act, obs, rew, term, trunc, mask, 0, SHOAL_NEXT_STEP);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double rate = (double)n * steps / ((b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec));
        if (rate > best) best = rate;
    }
    long finished = 0;
    for (int64_t i = 0; i < n; i++) finished += (long)eps[i].finished;
    printf("%.1f M steps/s, %ld episodes\n", best / 1e6, finished);
    return 0;
}
C
flags="-O3 -fno-strict-aliasing -Wno-unused-function -ffp-contract=off -fno-math-errno"
for side in old new; do
    ${CC:-cc} $flags -I"$work/$side" "$work/loop.c" -o "$work/loop_$side" -lm
done
for _ in $(seq "$rounds"); do
    for side in new old; do
        echo "$side $("$work/loop_$side")"
    done
done
