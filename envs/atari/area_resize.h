/* area_resize.h: OpenCV's INTER_AREA downscale of uint8 images, the same
 * float for float, laid out so the compiler can keep its pipes full.
 *
 * What it must equal: cv2.resize(src, (dst_w, dst_h), interpolation=
 * cv2.INTER_AREA) for a non-integer scale (Atari's 210x160 -> 84x84), which
 * is computeResizeAreaTab + ResizeArea_Invoker for uint8:
 *   row[dx]  = sum over the x taps of dx, in order, from 0: src[y][sx] * alpha
 *   out[dy]  = sum over the y taps of dy, in order: beta * row_of(sy)[dx]
 *   dst      = saturate(cvRound(out))
 * with float products and sums, each rounded on its own (no fused
 * multiply-add: built with -ffp-contract=off).
 *
 * The older loop in binding.pyx ran that tap list as written: one dependent
 * chain of float adds per destination pixel, and the horizontal pass of a
 * source row done again for every y tap that reads it (~100 us a frame).
 * Here the x taps are stored as `x_slots` columns, slot s of every
 * destination element next to each other (an element with fewer taps gets
 * weight 0 in its last slots: adding +0.0f to a sum >= 0 leaves it
 * unchanged), so each slot is one independent pass over the row; and the
 * last horizontal row is kept, because neighbouring y taps share their
 * boundary row: ~30 us a frame. Taps come from area_taps() in binding.pyx. */
#ifndef SHOAL_ATARI_AREA_RESIZE_H
#define SHOAL_ATARI_AREA_RESIZE_H

#include <math.h>
#include <stdint.h>

typedef struct {
    int width;              /* destination row length in elements (dst_w * channels) */
    int x_slots;            /* most x taps of one destination element */
    const int32_t* x_src;   /* [x_slots][width]: source element of each slot */
    const float* x_weight;  /* [x_slots][width]: its weight (0 for an unused slot) */
    int y_taps;             /* the y taps in OpenCV's order (by destination row) */
    const int32_t* y_dst;
    const int32_t* y_src;
    const float* y_weight;
    int src_width;          /* source row length in elements (src_w * channels) */
    float* pixels;          /* scratch [src_width]: one source row as floats */
    float* row;             /* scratch [width]: horizontal sums of one source row */
    float* sum;             /* scratch [width]: the destination row being summed */
} area_plan;

/* The horizontal pass of one source row into plan->row (the row is made
 * float first: the slot loops then gather floats; in a throwaway C harness
 * 25 us a frame against 37 us converting each gathered byte). */
static inline void area_row(const area_plan* plan, const uint8_t* restrict src_row) {
    /* Locals and restrict: the plan's fields are read once, and the
     * compiler may keep everything in registers knowing the scratch rows do
     * not overlap. The usual slot counts (2-4) are one pass each; a sum
     * written out is evaluated left to right, as the += loop would. */
    const int width = plan->width, src_width = plan->src_width, slots = plan->x_slots;
    float* restrict row = plan->row;
    float* restrict pixels = plan->pixels;
    const int32_t* restrict x = plan->x_src;
    const float* restrict w = plan->x_weight;
    const int32_t *x1 = x + width, *x2 = x1 + width, *x3 = x2 + width;
    const float *w1 = w + width, *w2 = w1 + width, *w3 = w2 + width;
    for (int i = 0; i < src_width; i++) pixels[i] = (float)src_row[i];
    switch (slots) {
    case 2:
        for (int i = 0; i < width; i++) row[i] = pixels[x[i]] * w[i] + pixels[x1[i]] * w1[i];
        return;
    case 3:
        for (int i = 0; i < width; i++)
            row[i] = pixels[x[i]] * w[i] + pixels[x1[i]] * w1[i] + pixels[x2[i]] * w2[i];
        return;
    case 4:
        for (int i = 0; i < width; i++)
            row[i] = pixels[x[i]] * w[i] + pixels[x1[i]] * w1[i] + pixels[x2[i]] * w2[i]
                   + pixels[x3[i]] * w3[i];
        return;
    }
    for (int i = 0; i < width; i++) row[i] = 0.0f;
    for (int s = 0; s < slots; s++)
        for (int i = 0; i < width; i++)
            row[i] += pixels[x[(int64_t)s * width + i]] * w[(int64_t)s * width + i];
}

static inline void area_store(const float* restrict sum, uint8_t* restrict dst, int width) {
    for (int i = 0; i < width; i++) {
        long v = lrintf(sum[i]);
        dst[i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
}

/* dst (dst_h rows of plan->width bytes) = the INTER_AREA resize of src
 * (rows of src_stride bytes). */
static inline void area_resize(const area_plan* plan, const uint8_t* src, int64_t src_stride,
                               uint8_t* dst) {
    const int width = plan->width, taps = plan->y_taps;
    float* restrict sum = plan->sum;
    const float* restrict row = plan->row;
    int32_t row_of = -1, dy_prev = plan->y_dst[0];
    for (int j = 0; j < taps; j++) {
        const int32_t dy = plan->y_dst[j], sy = plan->y_src[j];
        const float beta = plan->y_weight[j];
        if (sy != row_of) {
            area_row(plan, src + sy * src_stride);
            row_of = sy;
        }
        if (j == 0 || dy != dy_prev) {
            if (j > 0) area_store(sum, dst + (int64_t)dy_prev * width, width);
            for (int i = 0; i < width; i++) sum[i] = beta * row[i];
            dy_prev = dy;
        } else {
            for (int i = 0; i < width; i++) sum[i] += beta * row[i];
        }
    }
    area_store(sum, dst + (int64_t)dy_prev * width, width);
}

#endif
