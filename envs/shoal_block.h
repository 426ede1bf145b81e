/* shoal_block.h — how a pool worker drives a block of envs.
 *
 * An env binding's Block fills one of these tables; the worker loop in
 * shoal.pool._native calls run(ctx, command) without knowing which env it
 * steps. */
#ifndef SHOAL_BLOCK_H
#define SHOAL_BLOCK_H

/* STEP_SELECTED: step only the envs whose step_selected entry is nonzero
 * (EnvPool's step of some env ids); 4 is the Python workers' MESSAGE. */
enum { SHOAL_CMD_STEP = 1, SHOAL_CMD_RESET = 2, SHOAL_CMD_CLOSE = 3, SHOAL_CMD_STEP_SELECTED = 5 };

typedef struct {
    void (*run)(void* ctx, int command);
    void* ctx;
} shoal_block_ops;

#endif
